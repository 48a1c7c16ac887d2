"""The state of one pytest run, kept on ``config.stash``.

One object holds the validated options, the cache root (created on first use),
and the per-test records that end up in the report.  Nothing here imports torch,
and what only an option or a test of the plugin needs (the cache root's module,
``--cudagraph-devices``' parser) is imported when it is needed.  Loaded once the
run uses the plugin (``activation``).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..envvars import EnvironmentPatch
from ..errors import UsageProblem
from .markers import MarkerArgumentError, parse_capture_sizes
from .options import GROUP_CHOICES  # --cudagraph-group's values, defined with the options

if TYPE_CHECKING:
    from ..caches.cache_root import CacheRoot

__all__ = ["GROUP_CHOICES", "Options", "RunState", "read_options"]
# ini option values are strings: "1 2 4 8" or "1,2,4,8"
_SIZE_SEPARATORS = re.compile(r"[,\s]+")


@dataclass(frozen=True)
class Options:
    """The plugin's command-line and ini options, validated."""

    enabled: bool = False
    require_gpu: bool = False
    report_path: Path | None = None
    baseline_path: Path | None = None
    cache_dir: Path | None = None
    capture_sizes: tuple[int, ...] | None = None
    rtol: float | None = None
    atol: float | None = None
    # compare rules that make --cudagraph-baseline fail the run (None: the default rules)
    baseline_rules: tuple[str, ...] | None = None
    # --cudagraph-devices as given, and parsed: "auto" or device indices
    devices_raw: str | None = None
    devices: str | tuple[int, ...] | None = None
    # --cudagraph-group: "none" or "module"
    group: str = "none"

    @property
    def any_given(self) -> bool:
        return bool(self.enabled or self.report_path or self.baseline_path or self.cache_dir or self.devices)


def _ini_float(config: Any, name: str) -> float | None:
    raw = str(config.getini(name) or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise UsageProblem(f"ini option {name} = {raw!r} is not a non-negative number; set it to a float such as 1e-5")
    return value


def _ini_sizes(config: Any) -> tuple[int, ...] | None:
    raw = str(config.getini("cudagraph_capture_sizes") or "").strip()
    if not raw:
        return None
    parts = [p for p in _SIZE_SEPARATORS.split(raw) if p]
    values: list[Any] = []
    for part in parts:
        try:
            values.append(int(part))
        except ValueError:
            values.append(part)
    try:
        return parse_capture_sizes(values, "ini option cudagraph_capture_sizes")
    except MarkerArgumentError as exc:
        raise UsageProblem(str(exc)) from None


def _ini_rules(config: Any) -> tuple[str, ...] | None:
    raw = str(config.getini("cudagraph_baseline_fail_on") or "").strip()
    if not raw:
        return None
    from ..tools.compare_rules import parse_rules  # reads JSON only; imports no torch

    try:
        return parse_rules([raw])
    except ValueError as exc:
        raise UsageProblem(f"ini option cudagraph_baseline_fail_on = {raw!r}: {exc}") from None


def _path_option(config: Any, name: str) -> str | None:
    value = config.getoption(name)
    if value is not None and not str(value).strip():
        # "--cudagraph-report=$REPORT" with REPORT unset: ignoring it would silently drop the report
        flag = "--" + name.replace("_", "-")
        raise UsageProblem(f"{flag} was given an empty path; give a path, or leave the option out")
    return value


def _devices(raw: str | None) -> str | tuple[int, ...] | None:
    if raw is None:
        return None
    from .devices import parse_device_spec

    return parse_device_spec(raw)


def read_options(config: Any) -> Options:
    require_gpu = bool(config.getoption("cudagraph_require_gpu"))
    report = _path_option(config, "cudagraph_report")
    baseline = _path_option(config, "cudagraph_baseline")
    cache_dir = _path_option(config, "cudagraph_cache_dir")
    devices_raw = config.getoption("cudagraph_devices")
    return Options(
        enabled=bool(config.getoption("cudagraph")) or require_gpu,
        require_gpu=require_gpu,
        report_path=Path(report).expanduser().absolute() if report else None,
        baseline_path=Path(baseline).expanduser() if baseline else None,
        cache_dir=Path(cache_dir).expanduser().absolute() if cache_dir else None,
        capture_sizes=_ini_sizes(config),
        rtol=_ini_float(config, "cudagraph_rtol"),
        atol=_ini_float(config, "cudagraph_atol"),
        baseline_rules=_ini_rules(config),
        devices_raw=devices_raw,
        devices=_devices(devices_raw),
        group=config.getoption("cudagraph_group"),
    )


@dataclass
class RunState:
    """Everything the plugin keeps for one run (one per process under xdist)."""

    options: Options
    rootdir: Path
    # set by the xdist controller for its workers, so that all share one default root
    shared_root_hint: Path | None = None
    # the pytest Config; its tmp-path factory exists only after pytest's own configure
    config: Any = None
    baseline: dict[str, Any] | None = None
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    # what wider-scoped fixtures compiled, apart from the tests they were set up for (fixture_compiles)
    fixture_setups: list[dict[str, Any]] = field(default_factory=list)
    uses_plugin: bool = False
    # the run's cache environment (--cudagraph-cache-dir), put back at the end of the run
    environment: EnvironmentPatch = field(default_factory=EnvironmentPatch)
    # set at the end of a run with --cudagraph-baseline (a compare.Comparison)
    baseline_comparison: Any = None
    # one sentence when the report could not be written at the end of the run
    report_error: str | None = None
    # --cudagraph-devices resolved: the device ids workers are pinned to, round-robin
    devices: list[str] = field(default_factory=list)
    # the CUDA_VISIBLE_DEVICES entry this process was pinned to, if any
    pinned_device: str | None = None
    # --cudagraph-group=module on the xdist controller: the plugin's scheduler is used
    group_scheduling: bool = False
    _cache_root: CacheRoot | None = None

    def cache_root(self) -> CacheRoot:
        """The run's cache root, created (0700) on first use."""
        if self._cache_root is None:
            from ..caches.cache_root import CacheRoot, ensure_private_dir

            if self.options.cache_dir is not None:
                path = ensure_private_dir(self.options.cache_dir, "--cudagraph-cache-dir")
                self._cache_root = CacheRoot(path, persistent=True)
            else:
                path = self.shared_root_hint or self.default_root_path()
                self._cache_root = CacheRoot(ensure_private_dir(path, "cache root"), persistent=False)
        return self._cache_root

    @property
    def cache_root_if_created(self) -> CacheRoot | None:
        return self._cache_root

    def default_root_path(self) -> Path:
        """A fresh directory for this run under pytest's base temp directory (a private temp one if unusable)."""
        try:
            from .. import _compat  # not at import: the plugin loads this module in every run

            basetemp = _compat.run_basetemp(self.config)
        except OSError:  # basetemp unusable (read-only tmp, not ours): fall back below
            basetemp = None
        if basetemp is not None:
            return basetemp / "cudagraph-cache"
        return Path(tempfile.mkdtemp(prefix="pytest-cudagraph-"))

    def apply_run_cache_environment(self) -> None:
        """With --cudagraph-cache-dir, point the whole run's compile caches into the root."""
        from ..caches.cache_root import ensure_private_dir

        root = self.cache_root()
        ensure_private_dir(root.inductor_dir, "Inductor cache directory")
        ensure_private_dir(root.triton_dir, "Triton cache directory")
        self.environment.set(root.run_cache_environment())

    def restore_environment(self) -> None:
        self.environment.restore()
