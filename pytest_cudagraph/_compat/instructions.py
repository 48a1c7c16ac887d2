"""Callgrind's collection switched on while torch.compile works, and off for the rest of a run.

PyTorch counts the compile cost of its own benchmarks in instructions under
callgrind (``benchmarks/dynamo/pr_time_benchmarks``), toggled around the work with
``torch._C._valgrind_toggle()`` (a callgrind client request; outside valgrind it
does nothing).  Here the toggle goes around ``torch._dynamo.convert_frame._compile``,
the compile of one frame: Dynamo's tracing, AOTAutograd, and Inductor's lowering,
code generation and the loading of its module, or their FX-graph and AOTAutograd
cache hits.  ``_compile`` is called as a global of its module from 2.6 through
2.14 (checked: 2.6, 2.13, 2.14.1), so replacing the module's attribute catches
every frame compile.  A compile nested in another (none is, in these versions)
toggles once.  Not counted: a backward that AOTAutograd compiles lazily at its
first ``.backward()``, and whatever runs in other processes (Inductor's compile
workers, the C++ compiler, Triton's ptxas).
"""

from __future__ import annotations

from typing import Any

_installed: dict[str, Any] = {}


def count_compile_instructions() -> str | None:
    """Toggle callgrind's collection around every frame compile from now on; None, or why it cannot.

    Imports torch.  Called once, by the plugin, in a run that ``pytest-cudagraph
    startup --instructions`` starts under callgrind with collection off.
    """
    if _installed:
        return None
    import torch

    toggle = getattr(torch._C, "_valgrind_toggle", None)
    if toggle is None:
        return f"torch {torch.__version__} has no torch._C._valgrind_toggle: its instructions cannot be counted"
    import torch._dynamo.convert_frame as convert_frame

    original = getattr(convert_frame, "_compile", None)
    if not callable(original):
        return f"torch {torch.__version__} has no torch._dynamo.convert_frame._compile to count the compiles of"
    depth = [0]

    def counted_compile(*args: Any, **kwargs: Any) -> Any:
        if depth[0] == 0:
            toggle()
        depth[0] += 1
        try:
            return original(*args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                toggle()

    counted_compile.__wrapped__ = original  # type: ignore[attr-defined]
    convert_frame._compile = counted_compile
    _installed["original"] = original
    return None
