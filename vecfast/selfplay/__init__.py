"""Self-play building blocks for training loops of your own (a PettingZoo env, your own trainer).

:class:`Elo` rates policies and their snapshots from match results; :class:`SnapshotPool` keeps frozen past copies
of a learning policy and draws its opponents (latest or past); :class:`PBTController` decides, by Sample Factory's
population-based training rules, which policies copy which and how their hyperparameters and reward shaping mutate;
:class:`Population` is what ``vecfast.train(num_policies=N)`` runs: N learners sharing a sampler, mapped to agents
by ``policy_mapping(agent_id, EpisodeId)``; :func:`plan_for` chooses the acting plan a run plays by (a league, a
population, one policy) and any scheme runs it. None of the others steps an env or a model: they keep the books and the
loop applies them. :func:`~vecfast.selfplay.bots.random_bot` and :func:`~vecfast.selfplay.bots.one_ply_connect_four`
are fixed opponents to measure against; :func:`vecfast.selfplay.matches.play_games` (PettingZoo) plays the games.
"""

from __future__ import annotations

from vecfast.selfplay.bots import Bot, one_ply_connect_four, random_bot
from vecfast.selfplay.elo import Elo, PairRecord, expected_score
from vecfast.selfplay.pbt import (
    HYPERPARAMETERS,
    PBTController,
    PBTDecision,
    PolicySettings,
    hyperparameters_of,
)
from vecfast.selfplay.plans import plan_for
from vecfast.selfplay.population import EpisodeId, Population, RandomPolicyMapping
from vecfast.selfplay.snapshot_pool import Opponent, Snapshot, SnapshotPool

__all__ = [
    "HYPERPARAMETERS",
    "Bot",
    "Elo",
    "EpisodeId",
    "Opponent",
    "PBTController",
    "PBTDecision",
    "PairRecord",
    "PolicySettings",
    "Population",
    "RandomPolicyMapping",
    "Snapshot",
    "SnapshotPool",
    "expected_score",
    "hyperparameters_of",
    "one_ply_connect_four",
    "plan_for",
    "random_bot",
]
