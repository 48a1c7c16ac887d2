"""Collectives: which dispatched ops are torch.distributed collectives, and what a captured graph holds of them.

Two sources, read in torch 2.6-2.14 (the graph read-back on an H200, torch 2.11,
NCCL 2.28):

* **The calls.**  Every c10d collective reaches the dispatcher as an op:
  ``dist.all_reduce`` as ``c10d::allreduce_``, ``all_gather_into_tensor`` as
  ``c10d::_allgather_base_``, ``reduce_scatter_tensor`` as
  ``c10d::_reduce_scatter_base_``, the functional collectives (what Dynamo and
  Inductor emit for a compiled function) as ``_c10d_functional::all_reduce`` and
  kin.  A dispatch mode sees them with their tensors, so the kind, the dtype and
  the element count are exact.  A mode on the stack makes Dynamo skip the frames it
  would compile, unless the mode says ``ignore_compile_internals()`` (where torch has
  it: 2.11 and 2.13 do, 2.6 does not; then the compiled code runs, and its collectives still dispatch through
  the mode).  Where torch has no such method the recorder is pushed only around
  a capture, after warm-up compiled the function: the capture then hits Dynamo's
  cache (no frame is converted, so nothing is skipped).  A collective that does not
  go through the dispatcher (a communicator driven through ctypes, vLLM's
  ``PyNcclCommunicator``) is not seen here; the read-back below sees its kernels.
* **The graph.**  A graph captured with ``keep_graph=True`` (where the constructor
  takes it; debug mode before) keeps its ``cudaGraph_t`` after capture, and ``debug_dump(path)``
  writes it as DOT (``cudaGraphDebugDotPrint``): one node per kernel, memcpy or
  memset, with its topological position (``topoId``) and the kernel's symbol.
  NCCL's kernels are named ``ncclDevKernel_<Collective>_<RedOp>_<type>_<ALGO>_<PROTO>``
  (NCCL 2.19+; ``ncclKernel_...`` before); the symbol names the kind, the reduction
  and the element type, never the count, which lives in NCCL's device work
  structures.  Its generic kernels (``ncclDevKernel_Generic``) name no kind.  A
  one-rank communicator launches no NCCL kernel: an in-place sum leaves no node
  at all, an out-of-place collective a device-to-device memcpy, an average a
  ``oneRankReduce`` kernel (read on an H200 with NCCL 2.28.9).

Everything imports torch lazily.
"""

from __future__ import annotations

import os
import re
import tempfile
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for the annotations only: importing this module never imports torch
    import torch

from .fx import dispatch_mode_base, op_qualified_name, tree_leaves

__all__ = [
    "COLLECTIVE_KINDS",
    "collective_call",
    "collective_recorder_base",
    "graph_kernel_names",
    "instantiate_kept_graph",
    "kernel_names_in_dot",
    "nccl_kernel_collective",
    "new_readable_cuda_graph",
]

# Dispatcher op name (namespace::name, no overload) -> the collective's kind.
COLLECTIVE_KINDS: dict[str, str] = {
    "c10d::allreduce_": "all_reduce",
    "c10d::allreduce_coalesced_": "all_reduce",
    "c10d::allgather_": "all_gather",
    "c10d::_allgather_base_": "all_gather",
    "c10d::allgather_coalesced_": "all_gather",
    "c10d::allgather_into_tensor_coalesced_": "all_gather",
    "c10d::reduce_scatter_": "reduce_scatter",
    "c10d::_reduce_scatter_base_": "reduce_scatter",
    "c10d::reduce_scatter_tensor_coalesced_": "reduce_scatter",
    "c10d::broadcast_": "broadcast",
    "c10d::reduce_": "reduce",
    "c10d::gather_": "gather",
    "c10d::scatter_": "scatter",
    "c10d::alltoall_": "all_to_all",
    "c10d::alltoall_base_": "all_to_all",
    "c10d::send": "send",
    "c10d::recv_": "recv",
    "c10d::recv_any_source_": "recv",
    "c10d::barrier": "barrier",
    "_c10d_functional::all_reduce": "all_reduce",
    "_c10d_functional::all_reduce_": "all_reduce",
    "_c10d_functional::all_reduce_coalesced": "all_reduce",
    "_c10d_functional::all_reduce_coalesced_": "all_reduce",
    "_c10d_functional::all_gather_into_tensor": "all_gather",
    "_c10d_functional::all_gather_into_tensor_out": "all_gather",
    "_c10d_functional::all_gather_into_tensor_coalesced": "all_gather",
    "_c10d_functional::reduce_scatter_tensor": "reduce_scatter",
    "_c10d_functional::reduce_scatter_tensor_coalesced": "reduce_scatter",
    "_c10d_functional::all_to_all_single": "all_to_all",
    "_c10d_functional::broadcast": "broadcast",
    "_c10d_functional::broadcast_": "broadcast",
}

# The schema arguments that hold what a rank sends, by the names c10d's and the functional ops' schemas give them.
_SENT_ARGUMENTS = ("input", "inputs", "input_tensor", "input_tensors", "tensors", "tensor", "self")
_REDUCE_ARGUMENTS = ("reduce_op", "op")


def _tensors(value: Any) -> list[Any]:
    import torch

    return [leaf for leaf in tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _group_name(value: Any) -> str | None:
    """The group's name: the functional ops pass it as a string, c10d's ops a boxed ProcessGroup (``unbox``, 2.2+)."""
    if isinstance(value, str):
        return value
    try:
        from torch._C._distributed_c10d import ProcessGroup

        group = ProcessGroup.unbox(value) if not isinstance(value, ProcessGroup) else value
        name = group.group_name
    except Exception:  # not a process group, or a torch without unbox
        return None
    return name if isinstance(name, str) else None


# c10d's RedOpType, the value ``ReduceOp.op()`` returns (torch 2.6-2.14)
_REDUCE_OP_TYPES = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor", "premul_sum")


def _reduction(value: Any) -> str | None:
    """``"sum"`` for the functional ops' string, or for c10d's ReduceOp (a script object in the dispatcher).

    The script object has an ``op()`` method in 2.11 and 2.13; in 2.6 it has none,
    and a c10d op's reduction is None there.
    """
    if isinstance(value, str):
        return value.lower()
    try:
        code = value._get_method("op")() if hasattr(value, "_get_method") else getattr(value, "op", None)
    except Exception:
        return None
    code = getattr(code, "value", code)
    if isinstance(code, int) and 0 <= code < len(_REDUCE_OP_TYPES):
        return _REDUCE_OP_TYPES[code]
    return None


# every op a recorder sees is looked up here: reading an overload's schema name costs microseconds
_KIND_OF_OVERLOAD: dict[Any, tuple[str, str | None]] = {}


def _name_and_kind(func: Any) -> tuple[str, str | None]:
    found = _KIND_OF_OVERLOAD.get(func)
    if found is None:
        name = op_qualified_name(func)
        found = _KIND_OF_OVERLOAD[func] = (name, COLLECTIVE_KINDS.get(name))
    return found


def collective_call(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """What a dispatched collective op sends: ``{"kind", "op", "dtype", "count", "group", "reduce"}``, or None.

    None for an op that is not a collective (``wait_tensor`` included).  ``count``
    is the number of elements the rank sends (the sum over the op's input
    tensors, a coalesced op's several); ``dtype`` the first input's (``"float32"``);
    ``group`` the process group's name where the op names it; ``reduce`` the
    reduction (``"sum"``) where the op takes one and it can be read.
    """
    name, kind = _name_and_kind(func)
    if kind is None:
        return None
    schema = func._schema
    bound: dict[str, Any] = {}
    for position, argument in enumerate(schema.arguments):
        if position < len(args):
            bound[argument.name] = args[position]
        elif argument.name in kwargs:
            bound[argument.name] = kwargs[argument.name]
    sent: list[Any] = []
    for argument_name in _SENT_ARGUMENTS:
        if argument_name in bound:
            sent = _tensors(bound[argument_name])
            break
    group = None
    for argument_name in ("group_name", "process_group", "group", "tag"):
        if argument_name in bound:
            group = _group_name(bound[argument_name])
            if group is not None:
                break
    reduce = None
    for argument_name in _REDUCE_ARGUMENTS:
        if argument_name in bound:
            reduce = _reduction(bound[argument_name])
            break
    return {
        "kind": kind,
        "op": name,
        "dtype": str(sent[0].dtype).removeprefix("torch.") if sent else None,
        "count": sum(int(t.numel()) for t in sent) if sent else None,
        "group": group,
        "reduce": reduce,
    }


def collective_recorder_base() -> type:
    """The base class of a dispatch mode that records collectives and leaves Dynamo compiling where it can."""

    # the base is imported inside the function (importing the gateway does not import torch); mypy cannot follow a call
    class CollectiveRecorderBase(dispatch_mode_base()):  # type: ignore[misc]
        @classmethod
        def ignore_compile_internals(cls) -> bool:  # read by Dynamo where it exists; unused before
            return True

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # TorchDispatchMode wraps a subclass's __torch_dispatch__ in torch._disable_dynamo,
            # which imports torch._dynamo at the first op dispatched: 6.2 s on the H200 device
            # (torch 2.11), 1.9 s here, paid by the first capture of every rank process.  The
            # recorder is pushed around a capture, which Dynamo never traces, so it opts out
            # where this hook exists (2.11 and 2.13; where it does not, the wrapping stays).
            return False

    return CollectiveRecorderBase


def new_readable_cuda_graph() -> Any:
    """A ``torch.cuda.CUDAGraph`` that keeps its captured graph, so its nodes can be read after capture.

    ``CUDAGraph(keep_graph=True)`` where the constructor takes it (read in 2.11
    and 2.13; 2.6 has no such argument): ``capture_end`` then neither instantiates nor drops the graph,
    and ``instantiate_kept_graph`` instantiates it once it is read.  Debug mode
    alone no longer keeps it there (``debug_dump`` after ``capture_end`` writes
    nothing: read on an H200 with 2.11).  Without the argument, debug mode keeps
    it (``enable_debug_mode``: the graph is not destroyed after instantiation;
    not read on a GPU with such a torch).
    """
    import torch

    # Any: the graph carries a flag of this package's own, which torch's class does not declare
    graph: Any
    try:
        graph = torch.cuda.CUDAGraph(keep_graph=True)
    except TypeError:
        graph = torch.cuda.CUDAGraph()
        graph.enable_debug_mode()
        graph._pytest_cudagraph_kept = False
    else:
        graph._pytest_cudagraph_kept = True
    return graph


def instantiate_kept_graph(graph: torch.cuda.CUDAGraph) -> None:
    """Instantiate a graph ``new_readable_cuda_graph`` made with ``keep_graph=True``; nothing for one already instantiated."""
    if getattr(graph, "_pytest_cudagraph_kept", False):
        graph.instantiate()


# A kernel node's label in cudaGraphDebugDotPrint's output, over lines:
#   label="{KERNEL
#   | {ID | 3 (topoId: 2) | <symbol>\<\<\<grid,block,smem\>\>\>}
_KERNEL_NODE = re.compile(r'label="\{\s*KERNEL\s*\|\s*\{ID \| \d+ \(topoId: (\d+)\) \| ([^\\|}\s]+)')


def graph_kernel_names(graph: torch.cuda.CUDAGraph) -> list[str] | None:
    """The kernel symbols of a graph made by ``new_readable_cuda_graph``, in topological order; None if unreadable.

    Through ``debug_dump`` to a temporary file, its DOT parsed; the dump's own
    "DEBUG: calling debug_dump()" warnings are silenced.
    """
    descriptor, path = tempfile.mkstemp(prefix="cudagraph-nodes-", suffix=".dot")
    os.close(descriptor)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph.debug_dump(path)
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except (RuntimeError, OSError):
        return None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    if not text.strip():  # the graph was not kept: debug_dump wrote nothing
        return None
    return kernel_names_in_dot(text)


def kernel_names_in_dot(text: str) -> list[str]:
    """The kernel symbols of a ``cudaGraphDebugDotPrint`` dump, in topological order (``topoId``)."""
    kernels = sorted((int(topo), symbol.strip()) for topo, symbol in _KERNEL_NODE.findall(text))
    return [symbol for _, symbol in kernels]


_NCCL_KERNEL = re.compile(r"ncclDevKernel_([A-Za-z]+)_([A-Za-z]+)_([a-z0-9]+)_")
_NCCL_GENERIC = re.compile(r"nccl\w*Kernel")
_NCCL_KINDS = {
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "Reduce": "reduce",
    "SendRecv": "send_recv",
    "AllToAll": "all_to_all",
}
_NCCL_TYPES = {
    "i8": "int8", "u8": "uint8", "i32": "int32", "u32": "uint32", "i64": "int64", "u64": "uint64",
    "f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16",
    "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}  # fmt: skip


# A one-rank communicator's reduction kernel, mangled: oneRankReduce<FuncPreMulSum<float>> is
# "oneRankReduceI13FuncPreMulSumIfEEE..."; the element type is the template argument's mangled name.
_ONE_RANK_REDUCE = re.compile(r"oneRankReduceI\d+(Func\w+?)I(\d+__nv_bfloat16|\d+__half|[a-z])E")
_ONE_RANK_FUNCTIONS = {"FuncPreMulSum": "premul_sum", "FuncSumPostDiv": "sum_post_div"}
_MANGLED_TYPES = {
    "f": "float32", "d": "float64", "6__half": "float16", "13__nv_bfloat16": "bfloat16",
    "a": "int8", "h": "uint8", "i": "int32", "j": "uint32", "l": "int64", "m": "uint64",
}  # fmt: skip


def nccl_kernel_collective(symbol: str) -> dict[str, Any] | None:
    """The collective an NCCL kernel symbol names: ``{"kind", "reduce", "dtype"}`` (None where unnamed); None if not NCCL's.

    ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL`` is an all-reduce of bfloat16 by
    sum; a generic NCCL kernel is ``{"kind": "nccl", ...}`` with the rest None; a
    one-rank communicator's ``oneRankReduce`` is a ``reduce`` of its own.
    """
    match = _NCCL_KERNEL.search(symbol)
    if match is not None:
        collective, reduction, element = match.groups()
        return {
            "kind": _NCCL_KINDS.get(collective, collective),
            "reduce": reduction.lower(),
            "dtype": _NCCL_TYPES.get(element, element),
        }
    one_rank = _ONE_RANK_REDUCE.search(symbol)
    if one_rank is not None:
        function, element = one_rank.groups()
        return {
            "kind": "one_rank_reduce",
            "reduce": _ONE_RANK_FUNCTIONS.get(function, function),
            "dtype": _MANGLED_TYPES.get(element),
        }
    if _NCCL_GENERIC.search(symbol) is not None:
        return {"kind": "nccl", "reduce": None, "dtype": None}
    return None
