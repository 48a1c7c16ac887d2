"""Reading a failed capture: the real cause behind torch's follow-up error, the op and its line.

``describe_capture_failure`` gives the message of the ``CaptureError`` that
``guarded_capture`` raises; a failure inside Inductor's generated code is mapped
back to the user's line of the op.
"""

from __future__ import annotations

import linecache
import os
import re
import traceback

from .. import _compat
from ..compile.call_site import in_function, innermost_user_frame, is_library_file, same_statement
from ..errors import CaptureError

# (substring of the CUDA/torch message, what it means for the captured function)
_HOST_SYNC = (
    "a call that waits for the GPU or allocates outside the capture: a host sync "
    "(.item(), bool(tensor), .tolist(), nonzero(), torch.multinomial, torch.cuda.synchronize(), "
    "printing a tensor) or memory allocated on a stream that is not capturing"
)
_CAUSE_KINDS: tuple[tuple[str, str], ...] = (
    (
        "Cannot copy between CPU and CUDA tensors during CUDA graph capture",
        "a copy between host and GPU memory (.cpu(), .to('cpu'), .numpy(), or a pageable CPU tensor copied to the GPU)",
    ),
    ("operation not permitted when stream is capturing", _HOST_SYNC),
    ("cudaErrorStreamCaptureUnsupported", _HOST_SYNC),
    (
        "CUBLAS_STATUS_NOT_INITIALIZED",
        "cuBLAS being initialised inside the capture (the function was not warmed up on the capture stream)",
    ),
    (
        "legacy stream depend on a capturing blocking stream",
        "work issued on the default (legacy) stream while capturing",
    ),
    (
        "not joined",
        "work forked onto another stream during capture and not joined back "
        "(capture_stream.wait_stream(other)) before the capture ended",
    ),
    (
        "unjoined",
        "work forked onto another stream during capture and not joined back "
        "(capture_stream.wait_stream(other)) before the capture ended",
    ),
    (
        "Capture must end on the same stream it began on",
        "the captured function changed the current stream and did not restore it",
    ),
    ("isolation", "a stream outside the capture waited on the capturing stream"),
)
_GENERIC_CAPTURE_FAILURE = ("previous error during capture", "invalidated")
_OPS = (
    (r"\.item\(\)", ".item()"),
    (r"\.tolist\(\)", ".tolist()"),
    (r"\.cpu\(\)", ".cpu()"),
    (r"\.numpy\(\)", ".numpy()"),
    (r"synchronize\(", "torch.cuda.synchronize()"),
    (r"nonzero\(", "nonzero()"),
    (r"multinomial\(", "torch.multinomial()"),
    (r"\.to\([^)]*cpu", ".to('cpu')"),
    (r"\bprint\(", "print(tensor)"),
    (r"\b(bool|int|float)\(", "a tensor converted to a Python number"),
)


def _is_generic(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in _GENERIC_CAPTURE_FAILURE)


def real_cause(exc: BaseException) -> BaseException:
    """The first error of a failed capture, not torch's generic follow-up.

    ``capture_end`` reports "operation failed due to a previous error during
    capture"; the error that invalidated the capture is in ``__context__``.
    """
    chain = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    specific = [e for e in chain if not _is_generic(e) and not isinstance(e, CaptureError)]
    return specific[-1] if specific else chain[-1]


def _user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of the error that is the user's: not torch's, the plugin's, or Inductor's generated code."""
    return innermost_user_frame(exc.__traceback__, skip=_compat.is_generated_code)


def _op_of(line: str) -> str | None:
    for pattern, name in _OPS:
        if re.search(pattern, line):
            return name
    return None


def _generated_code_site(exc: BaseException) -> tuple[traceback.FrameSummary, str] | None:
    """For a failure inside Inductor's generated code: the user's line behind the op, and what ran there.

    The traceback's innermost frame in a generated module (``/tmp/torchinductor_*/..py``,
    function ``call``) is mapped through the line map Inductor recorded while writing
    it, to the user's source line of the op; the text names the generated line and
    the ATen ops of its comment.  None when no frame is generated or nothing maps.

    A line map read from the FX graph cache holds the stack traces of the compile
    that filled the cache, which may be another function with the same graph (in
    another file); it is used only where it lies in a function of this traceback,
    else its statement is looked up in that function's source.
    """
    tb = exc.__traceback__
    generated = None
    user_code = []
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if _compat.is_generated_code(filename):
            generated = (filename, tb.tb_lineno)
        elif not is_library_file(filename):
            user_code.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    if generated is None:
        return None
    origin = _compat.generated_code_origin(*generated)
    if origin is None:
        # Only now read frame locals (the compiled graph's line map): reading them keeps the
        # pool's tensors referenced from the traceback until its frames are cleared.
        compiled_graph = None
        tb = exc.__traceback__
        while tb is not None and compiled_graph is None:
            compiled_graph = _compat.compiled_graph_of_frame(tb.tb_frame)
            tb = tb.tb_next
        origin = _compat.generated_code_origin(*generated, compiled_graph=compiled_graph)
    if origin is None:
        return None
    frames = [f for f in origin["frames"] if not is_library_file(f["filename"])]
    if not frames:
        return None
    inside = f"in the compiled code `{origin['generated_line']}`"
    if origin.get("aten"):
        inside += f" (ATen: {origin['aten']})"
    if any(in_function(code, f["filename"], int(f["line"])) for f in frames for code in user_code):
        user = frames[0]
        filename, lineno, name = user["filename"], int(user["line"]), user["name"]
    else:
        # the map is from a cached compile of another function: find its statement in this one's source
        found = same_statement(user_code, frames[0]["filename"], int(frames[0]["line"]))
        if found is None:
            return None
        filename, lineno, name = found
    line = linecache.getline(filename, lineno).strip()
    return traceback.FrameSummary(filename, lineno, name, line=line), inside


def describe_capture_failure(exc: BaseException, label: str, fn_name: str) -> tuple[str, str | None]:
    """``(message, op)`` for a failed capture: the kind, the real cause, the op and the fix."""
    message, op, _ = describe_capture_failure_at(exc, label, fn_name)
    return message, op


def describe_capture_failure_at(
    exc: BaseException, label: str, fn_name: str
) -> tuple[str, str | None, tuple[str, int] | None]:
    """``(message, op, site)``: ``describe_capture_failure``'s, and the user's line of the op as ``(file, line)``.

    ``site`` is None where no line of the captured function failed (the capture failed when it ended).
    """
    cause = real_cause(exc)
    text = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    text = text.replace("CUDA error: ", "")
    kind = next((meaning for marker, meaning in _CAUSE_KINDS if marker in str(cause)), None)
    site = _generated_code_site(cause) or _generated_code_site(exc)
    frame, inside = site if site is not None else (_user_frame(cause), None)
    op = None
    if frame is not None:
        line = (frame.line or "").strip()
        op = _op_of(line)
        where = f"{os.path.basename(frame.filename)}:{frame.lineno} `{line}`"
        op_text = f"the op {op} at {where}" if op else f"the op at {where}"
        if inside:
            op_text += f", {inside}"
    else:
        op_text = "no line of the captured function (it failed when the capture ended)"
    if kind is None:
        kind = "an operation that cannot be captured"
    message = (
        f"capturing {fn_name} for {label} failed: {kind}; real cause {type(cause).__name__}: {text}; "
        f"{op_text}. Move host syncs, CPU copies and allocations on other streams out of the captured "
        f"function (do them before capture, or keep the values on the GPU as tensors). "
        f"The current stream, the CUDA RNG and the graph pool were restored, so the session can go on."
    )
    return message, op, (frame.filename, frame.lineno) if frame is not None and frame.lineno else None


def _clear_traceback_frames(exc: BaseException) -> None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if current.__traceback__ is not None:
            traceback.clear_frames(current.__traceback__)
        current = current.__cause__ or current.__context__


def break_at_hint(failing_op: str | None, break_at: list[str]) -> str:
    """For a breakable capture that failed: whether a break op would have covered the op that failed.

    A registered op of its own namespace (a custom op) can be broken at; one of
    torch's own (``aten::``) called from the captured code cannot be moved out of the
    graph that way.
    """
    given = ", ".join(repr(name) for name in break_at)
    if failing_op is None:
        return (
            f"No dispatched op raised (the failure came from the capture itself), so no break op would "
            f"cover it; the break ops were ({given})."
        )
    if failing_op.startswith(("aten::", "prim::", "prims::")):
        return (
            f"The op that failed, {failing_op}, is torch's own and is called from the captured code, so no "
            f"break_at op covers it: break_at moves only registered ops out of the graphs; move that code "
            f"out of the function, or into a custom op (torch.library.custom_op) and break at that op."
        )
    return (
        f"The op that failed, {failing_op}, is a registered op that cannot be captured: add "
        f"break_at=({given + ', ' if given else ''}{failing_op!r},) to end the graph there and run it eagerly."
    )
