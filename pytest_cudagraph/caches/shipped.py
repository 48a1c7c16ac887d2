"""The probe's checks of caches that ship: ``bundle_cycle()`` and ``precompiled()`` (``CacheProbe`` inherits them).

A service ships its compile cache as a Mega-Cache bundle, or as
``torch.compiler.precompile`` artifacts; these run the life of either through fresh
interpreters (``bundle_cycle``, ``precompiled``) and keep what they found for the
test's record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from .bundle_cycle import BundleCycle, run_bundle_cycle
from .precompiled import PrecompiledCheck, run_precompiled
from .readings import DEFAULT_SEED

if TYPE_CHECKING:
    from .pass_steps import PassSteps


class ShippedCacheChecks:
    """``bundle_cycle()`` and ``precompiled()`` on a probe that offers ``PassSteps`` and ``_require_active``."""

    # CacheProbe's: refuses a call outside the probe's ``with`` block
    _require_active: Callable[[str], None]

    def bundle_cycle(
        self,
        fn: Callable[..., Any] | str,
        *args: Any,
        extend: Any = None,
        strict: bool = False,
        mode: str = "subprocess",
        seed: int = DEFAULT_SEED,
    ) -> BundleCycle:
        """Save a bundle cold, load it fresh and extend it, save again, load that fresh (``bundle_cycle``).

        ``extend``: a second module-level function (called with ``args``) or a tuple
        of new arguments for ``fn``.  ``.check()`` fails when a load misses, outputs
        differ from the cold run's, or the second bundle lacks an artifact the first
        held (torch's own omission of loaded artifacts nothing hit only with
        ``strict=True``; otherwise ``.notes()`` says so and how to save the union).
        """
        self._require_active("bundle_cycle")
        cycle = run_bundle_cycle(cast("PassSteps", self), fn, args, extend, strict, mode, seed)
        self.__dict__.setdefault("_bundle_cycles", []).append(cycle)
        return cycle

    def precompiled(self, fn: Callable[..., Any], *args: Any, seed: int = DEFAULT_SEED) -> PrecompiledCheck:
        """``torch.compiler.precompile(fn, *args)`` loaded in a fresh interpreter and checked (``precompiled``).

        ``.check()`` fails when the load compiled a graph, its output differs from
        eager, or a changed input shape or dtype gives a wrong answer instead of
        torch's PrecompileError.  On a torch without precompile (before 2.14) it
        raises MisuseError naming the version.
        """
        self._require_active("precompiled")
        check = run_precompiled(cast("PassSteps", self), fn, args, seed)
        self.__dict__.setdefault("_precompiled", []).append(check)
        return check

    @property
    def bundle_cycles(self) -> tuple[BundleCycle, ...]:
        """Every ``bundle_cycle()`` this probe ran, in order."""
        return tuple(self.__dict__.get("_bundle_cycles", ()))

    @property
    def precompiled_checks(self) -> tuple[PrecompiledCheck, ...]:
        """Every ``precompiled()`` this probe ran, in order."""
        return tuple(self.__dict__.get("_precompiled", ()))
