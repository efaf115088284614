"""vecfast.selfplay.probes reads the policy's own beliefs at the turns one move decides."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_selfplay_matches import board, connect_four_policy

from vecfast.selfplay.bots import one_move_tactics
from vecfast.selfplay.probes import BeliefProbe, probing_bot
from vecfast.trainers.algorithm.models import obs_to_tensors


def probabilities(policy, observation) -> np.ndarray:  # noqa: ANN001
    entries = {key: np.asarray(observation[key])[None] for key in policy.obs_spaces}
    dist, _, _ = policy.step(obs_to_tensors(entries, "cpu"), policy.initial_state(1), torch.ones(1, dtype=torch.bool))
    return dist.dists[0].probs[0].detach().numpy()


def test_where_it_can_win_the_probe_records_the_probability_of_the_winning_column() -> None:
    policy, probe = connect_four_policy(), BeliefProbe()
    position = board([(5, 0), (5, 1), (5, 2)], [(4, 0), (4, 1)])  # a win in column 3
    assert one_move_tactics(position) == ([3], [])
    move = probing_bot(policy, probe)(position)
    assert position["action_mask"][move]
    assert probe.win_probability == pytest.approx([probabilities(policy, position)[3]])
    assert len(probe.win_value) == 1
    assert probe.block_probability == []


def test_where_it_must_block_the_probe_records_the_probability_of_the_blocking_column() -> None:
    policy, probe = connect_four_policy(), BeliefProbe()
    position = board([(4, 2), (4, 3)], [(5, 2), (5, 3), (5, 4)])  # the opponent wins in 1 or 5: both block
    assert one_move_tactics(position) == ([], [1, 5])
    probing_bot(policy, probe)(position)
    assert probe.block_probability == pytest.approx([probabilities(policy, position)[[1, 5]].sum()])
    assert probe.win_probability == []
