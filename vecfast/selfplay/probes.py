"""What a connect-four policy believes where one move decides: the probability it puts on the winning (or blocking)
column, and its critic's value where it can win at once.

A policy that half-takes its wins because it is unsure puts ~0.5 on them everywhere; one that has learned some
patterns and not others puts ~1 on some and ~0 on the rest. The critic should value a position it wins at once with
probability p at about p (a win is worth 1): a much lower value says the critic does not see the win either. How
issue 35 told a self-play plan that limits learning from a learner or a model that does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from vecfast.selfplay.bots import Bot, one_move_tactics
from vecfast.trainers.algorithm.models import ActorCritic, obs_to_tensors


@dataclass
class BeliefProbe:
    """The policy's probability on the tactical columns at each decisive turn, and its value where it could win."""

    win_probability: list[float] = field(default_factory=list)
    win_value: list[float] = field(default_factory=list)
    block_probability: list[float] = field(default_factory=list)


def probing_bot(policy: ActorCritic, probe: BeliefProbe) -> Bot:
    """``policy`` as a bot that samples its moves and records its beliefs at decisive turns into ``probe``."""

    def bot(observation: Mapping[str, Any]) -> int:
        entries = {key: np.asarray(observation[key])[None] for key in policy.obs_spaces}
        with torch.no_grad():
            dist, value, _ = policy.step(
                obs_to_tensors(entries, "cpu"), policy.initial_state(1), torch.ones(1, dtype=torch.bool)
            )
        probs = dist.dists[0].probs[0].numpy()
        wins, blocks = one_move_tactics(observation)
        if wins:
            probe.win_probability.append(float(probs[wins].sum()))
            probe.win_value.append(float(value[0]))
        elif blocks:
            probe.block_probability.append(float(probs[blocks].sum()))
        return int(dist.sample()[0])

    return bot
