"""Global torch state that a test using the plugin must leave as it found it.

A test that sets Inductor's ``config.fx_graph_cache = False``, calls
``torch.compiler.set_stance("force_eager")`` or ``torch.set_default_dtype`` and
forgets to undo it changes every test that runs after it in the same process, so
a suite's verdicts would depend on test order and on how xdist splits it.  For
every test that uses a marker or fixture of the plugin, the plugin takes a
snapshot of that state once the fixtures of wider scope are set up (at the test's
first function-scoped fixture) and puts it back once its function-scoped fixtures
are torn down, whatever the test body did; what a session or module fixture set
stays (plugin/state_isolation.py):

- Dynamo's, Inductor's and functorch's configs (only the keys that changed are set back);
- the compile stance (``torch.compiler.set_stance``);
- the compile-cache environment variables (``TORCHINDUCTOR_*``, ``TRITON_*``,
  ``TORCHDYNAMO_*``, ``TORCH_COMPILE_*``);
- the default device and dtype;
- the CPU RNG state, and every CUDA device's RNG state where CUDA was initialised
  before the test;
- Dynamo's caches: when the test compiled, recompiled or reset anything, Dynamo
  is reset afterwards, so nothing the test compiled (entries, guard failures,
  dimensions marked dynamic by automatic-dynamic) reaches a later test.  Entries
  compiled before the test survive a test that compiles nothing; those of a test
  that compiled are dropped with the rest, and compile again (from the warm FX
  graph cache) where a later test calls them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import _compat
from ..envvars import environment_snapshot, restore_environment_snapshot

ENVIRONMENT_PREFIXES = ("TORCHINDUCTOR_", "TRITON_", "TORCHDYNAMO_", "TORCH_COMPILE_")


@dataclass
class TorchStateSnapshot:
    """The global state of one process at one point; ``restore()`` puts it back."""

    configs: dict[str, dict[str, Any]]
    stance: Any
    environment: dict[str, str]
    default_device: Any
    default_dtype: Any
    cpu_rng: Any
    cuda_rng: list[Any] | None
    dynamo_entries: dict[int, int]

    @classmethod
    def take(cls) -> TorchStateSnapshot:
        import torch

        cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
        return cls(
            configs=_compat.compile_config_snapshot(),
            stance=_compat.compile_stance(),
            environment=environment_snapshot(ENVIRONMENT_PREFIXES),
            default_device=_compat.default_device_setting(),
            default_dtype=torch.get_default_dtype(),
            cpu_rng=torch.get_rng_state(),
            cuda_rng=cuda_rng,
            dynamo_entries=_compat.dynamo_cache_entry_counts(),
        )

    def restore(self) -> list[str]:
        """Put everything back; returns what was changed (``"<config module>.<key>"``, ``"compile stance"``, ...)."""
        import torch

        restored = _compat.restore_compile_config(self.configs)

        if _compat.compile_stance() is not self.stance:
            _compat.restore_compile_stance(self.stance)
            restored.append("compile stance")

        restored += [f"${name}" for name in restore_environment_snapshot(self.environment, ENVIRONMENT_PREFIXES)]

        if _compat.default_device_setting() != self.default_device:
            torch.set_default_device(self.default_device)
            restored.append("default device")
        if torch.get_default_dtype() != self.default_dtype:
            torch.set_default_dtype(self.default_dtype)
            restored.append("default dtype")

        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)

        if _compat.dynamo_cache_entry_counts() != self.dynamo_entries:
            _compat.reset_dynamo()
            restored.append("Dynamo caches")
        return restored
