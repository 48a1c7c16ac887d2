"""Tensor-parallel CUDA graphs: a body run on ``world_size`` ranks, one process per GPU, that never hangs.

- ``launch``: ``run_ranks(body, *args, world_size=, timeout=, backend=)``, the plain
  API: spawns the ranks, watches them, stops them all when one fails or time runs out;
- ``child``: one rank's process: a process group of its own (with a keeper that stops it when
  the launcher dies), environment, torch.distributed process group, body, teardown;
- ``handle``: ``Rank``, what the body gets: rank, group, device, ``capture``, ``assert_ranks_agree``;
- ``stacks``: where a stuck rank was, from its faulthandler dump;
- ``results``: ``RankResult``, ``RanksResult`` (the report's ``ranks`` section), ``RanksFailed``.

Importing this package imports no torch; ``handle`` does, and only rank processes load it.
"""

from __future__ import annotations

from .launch import DEFAULT_TIMEOUT_S, RANK_ENV_DEFAULTS, gpu_shortfall, run_ranks
from .results import RankError, RankResult, RankSections, RanksFailed, RanksResult

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "RANK_ENV_DEFAULTS",
    "RankError",
    "RankResult",
    "RankSections",
    "RanksFailed",
    "RanksResult",
    "gpu_shortfall",
    "run_ranks",
]
