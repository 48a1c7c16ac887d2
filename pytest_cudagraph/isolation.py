"""Global torch state that a test using the plugin must leave as it found it.

A test that sets ``torch._inductor.config.fx_graph_cache = False``, calls
``torch.compiler.set_stance("force_eager")`` or ``torch.set_default_dtype`` and
forgets to undo it changes every test that runs after it in the same process, so
a suite's verdicts would depend on test order and on how xdist splits it.  For
every test that uses a marker or fixture of the plugin, the plugin takes a
snapshot of that state before the test's fixtures are set up and puts it back
after they are torn down, whatever the test body did:

- Dynamo's and Inductor's configs (only the keys that changed are set back);
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

import os
from dataclasses import dataclass
from typing import Any

ENVIRONMENT_PREFIXES = ("TORCHINDUCTOR_", "TRITON_", "TORCHDYNAMO_", "TORCH_COMPILE_")


def _cache_environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name.startswith(ENVIRONMENT_PREFIXES)}


def _config_modules() -> dict[str, Any]:
    import torch._dynamo.config
    import torch._inductor.config

    return {"torch._dynamo.config": torch._dynamo.config, "torch._inductor.config": torch._inductor.config}


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # values without a boolean equality (tensors): treat as changed
        return False


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

        from . import _compat

        cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
        return cls(
            configs={name: module.get_config_copy() for name, module in _config_modules().items()},
            stance=_compat.compile_stance(),
            environment=_cache_environment(),
            default_device=_compat.default_device_setting(),
            default_dtype=torch.get_default_dtype(),
            cpu_rng=torch.get_rng_state(),
            cuda_rng=cuda_rng,
            dynamo_entries=_compat.dynamo_cache_entry_counts(),
        )

    def restore(self) -> list[str]:
        """Put everything back; returns what was changed (``"torch._inductor.config.x"``, ...)."""
        import torch

        from . import _compat

        restored: list[str] = []
        for name, module in _config_modules().items():
            before = self.configs[name]
            for key, value in module.get_config_copy().items():
                if key in before and not _same(value, before[key]):
                    setattr(module, key, before[key])
                    restored.append(f"{name}.{key}")

        if _compat.compile_stance() is not self.stance:
            _compat.restore_compile_stance(self.stance)
            restored.append("compile stance")

        now = _cache_environment()
        for name in sorted(set(now) | set(self.environment)):
            if now.get(name) == self.environment.get(name):
                continue
            if name in self.environment:
                os.environ[name] = self.environment[name]
            else:
                del os.environ[name]
            restored.append(f"${name}")

        if not _same(_compat.default_device_setting(), self.default_device):
            torch.set_default_device(self.default_device)
            restored.append("default device")
        if torch.get_default_dtype() != self.default_dtype:
            torch.set_default_dtype(self.default_dtype)
            restored.append("default dtype")

        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)

        if _compat.dynamo_cache_entry_counts() != self.dynamo_entries:
            import torch._dynamo

            torch._dynamo.reset()
            restored.append("Dynamo caches")
        return restored
