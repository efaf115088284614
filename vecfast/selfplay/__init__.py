"""Self-play building blocks for training loops of your own (a PettingZoo env, your own trainer).

:class:`Elo` rates policies and their snapshots from match results; :class:`SnapshotPool` keeps frozen past
copies of a learning policy and draws its opponents (latest or past); :class:`PBTController` decides, by
Sample Factory's population-based training rules, which policies copy which and how their hyperparameters and
reward shaping mutate. None of them steps an env or a model: they keep the books and the loop applies them.
"""

from __future__ import annotations

from vecfast.selfplay.elo import Elo, PairRecord, expected_score
from vecfast.selfplay.pbt import (
    HYPERPARAMETERS,
    PBTConfig,
    PBTController,
    PBTDecision,
    PolicySettings,
    hyperparameters_of,
)
from vecfast.selfplay.snapshot_pool import Opponent, Snapshot, SnapshotPool

__all__ = [
    "HYPERPARAMETERS",
    "Elo",
    "Opponent",
    "PBTConfig",
    "PBTController",
    "PBTDecision",
    "PairRecord",
    "PolicySettings",
    "Snapshot",
    "SnapshotPool",
    "expected_score",
    "hyperparameters_of",
]
