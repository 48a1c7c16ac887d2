"""``python -m pytest_cudagraph.caches SPEC``: one warm pass of a callable in a fresh interpreter.

The child's front: it opens a probe (``probe``) on the parent's cache directory and
runs the pass; the spec and the result's file are ``child``'s.
"""

from __future__ import annotations

import functools
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
    """``python -m pytest_cudagraph.caches SPEC [--module NAME FILE [--package-path DIR]] [--load-artifacts FILE]
    [--then SPEC2] [--save-artifacts FILE]``.

    One warm pass.  ``--module``: the function's module is imported from FILE
    (before the spec, whose arguments may refer to its classes), a package's
    submodules from DIR (``--package-path``); ``--load-artifacts``: the Mega-Cache
    artifacts in FILE are loaded into the cache directory before the pass
    (``portable(mode="subprocess")``).  ``--then``: a second pass, of SPEC2, after
    the first in the same interpreter and cache; ``--save-artifacts``: after the
    passes, the process's Mega-Cache artifacts are saved to FILE, as a service saves
    its bundle (``bundle_cycle``).  Each pass's results go to its spec's out.
    """
    import torch

    options: dict[str, list[str]] = {}
    rest = argv[1:]
    while rest:
        count = 2 if rest[0] == "--module" else 1
        options[rest[0]], rest = rest[1 : 1 + count], rest[1 + count :]
    if "--module" in options:
        _import_from_file(*options["--module"], *options.get("--package-path", ()))
    specs = [torch.load(path, weights_only=False) for path in (argv[0], *options.get("--then", ()))]
    directory = Path(specs[0]["cache_dir"])  # our own files, in the probe's private directory
    current = specs[0]
    try:
        with compat.applied_compile_config(specs[0].get("config") or {}):
            with cache_probe(directory=directory) as probe:
                if "--load-artifacts" in options:
                    compat.clear_in_memory_compile_caches()
                    compat.load_cache_artifacts(Path(options["--load-artifacts"][0]).read_bytes())
                for current in specs:
                    call = functools.partial(resolve_importable(current["target"]), *current["args"])
                    result = probe.run_pass("warm", call, current["seed"], directory)
                    write_pass_output(current["out"], result)
    except BaseException:
        write_pass_output(current["out"], None, error=traceback.format_exc(limit=-8))
        return 1
    if "--save-artifacts" in options:
        Path(options["--save-artifacts"][0]).write_bytes(compat.save_cache_artifacts() or b"")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
