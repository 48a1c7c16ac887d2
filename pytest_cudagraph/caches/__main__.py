"""``python -m pytest_cudagraph.caches SPEC``: one warm pass of a callable in a fresh interpreter.

The child's front: it opens a probe (``probe``) on the parent's cache directory and
runs the pass; the spec and the result's file are ``child``'s.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from .. import _compat as compat
from .child import resolve_importable, write_pass_output
from .probe import cache_probe


def _import_from_file(module_name: str, path: str, package_path: str | None = None) -> None:
    """Import ``module_name`` from the file ``path`` (relocate(): the function's module copied elsewhere).

    ``package_path``: ``path`` is a package's ``__init__.py``, whose submodules are
    imported from ``package_path`` (where they are): imported as a plain module, the
    package would have none.
    """
    import importlib.util

    locations = [package_path] if package_path is not None else None
    spec = importlib.util.spec_from_file_location(module_name, path, submodule_search_locations=locations)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported as {module_name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)


def main(argv: list[str]) -> int:
    """``python -m pytest_cudagraph.caches SPEC [--module NAME FILE [--package-path DIR]] [--load-artifacts FILE]``.

    One warm pass.  ``--module``: the function's module is imported from FILE
    (before the spec, whose arguments may refer to its classes), a package's
    submodules from DIR (``--package-path``); ``--load-artifacts``: the Mega-Cache
    artifacts in FILE are loaded into the cache directory before the pass
    (``portable(mode="subprocess")``).  The pass's results go to SPEC's out.
    """
    import torch

    options: dict[str, list[str]] = {}
    rest = argv[1:]
    while rest:
        count = 2 if rest[0] == "--module" else 1
        options[rest[0]], rest = rest[1 : 1 + count], rest[1 + count :]
    if "--module" in options:
        _import_from_file(*options["--module"], *options.get("--package-path", ()))
    spec = torch.load(argv[0], weights_only=False)  # our own file, in the probe's private directory
    try:
        fn = resolve_importable(spec["target"])
        with compat.applied_compile_config(spec.get("config") or {}):
            with cache_probe(directory=Path(spec["cache_dir"])) as probe:
                if "--load-artifacts" in options:
                    compat.clear_in_memory_compile_caches()
                    compat.load_cache_artifacts(Path(options["--load-artifacts"][0]).read_bytes())
                result = probe.run_pass("warm", lambda: fn(*spec["args"]), spec["seed"], Path(spec["cache_dir"]))
    except BaseException:
        write_pass_output(spec["out"], None, error=traceback.format_exc(limit=-8))
        return 1
    write_pass_output(spec["out"], result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
