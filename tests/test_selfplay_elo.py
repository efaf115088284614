"""Elo ratings (FIDE convention) checked against numbers worked out by hand, the pair table, and plain-data state."""

from __future__ import annotations

import io

import pytest
import torch

from vecfast.selfplay import Elo


def test_a_win_between_equals_moves_16_points_and_an_upset_moves_more() -> None:
    elo = Elo()  # k 32, everyone at 1000
    elo.record("a", "b", 1.0)
    # equal ratings expect 0.5 each: 32 * (1 - 0.5) = 16
    assert elo.rating("a") == 1016.0 and elo.rating("b") == 984.0
    # b (984) against a (1016): expected 1 / (1 + 10 ** (32 / 400)) = 1 / (1 + 1.2022644) = 0.4540781,
    # so b's win gains 32 * (1 - 0.4540781) = 17.4695015
    elo.record("a", "b", 0.0)
    assert elo.rating("b") == pytest.approx(1001.4695015, abs=1e-6)
    assert elo.rating("a") == pytest.approx(998.5304985, abs=1e-6)
    assert elo.rating("a") + elo.rating("b") == pytest.approx(2000.0)  # zero-sum


def test_a_draw_moves_the_stronger_player_down() -> None:
    elo = Elo()
    elo.record("a", "b", 1.0)  # 1016 / 984
    # a expects 1 - 0.4540781 = 0.5459219; a draw costs it 32 * (0.5 - 0.5459219) = -1.4695015
    elo.record("b", "a", 0.5)
    assert elo.rating("a") == pytest.approx(1014.5304985, abs=1e-6)
    assert elo.rating("b") == pytest.approx(985.4695015, abs=1e-6)
    equals = Elo(k=16, initial=1500)
    equals.record("c", "d", 0.5)
    assert equals.rating("c") == equals.rating("d") == 1500.0
    assert equals.rating("never played") == 1500.0


def test_k_scales_the_change() -> None:
    elo = Elo(k=10)
    elo.record("a", "b", 1.0)
    assert elo.rating("a") == 1005.0 and elo.rating("b") == 995.0


def test_a_match_of_three_is_rated_pairwise_from_the_ratings_before_it() -> None:
    elo = Elo()
    elo.record_match(["p", "q", "r"], [1.0, 0.0, 0.0])
    # p beats q and r (+16 each from 1000 vs 1000); q and r tie on 0: a draw between equals moves nothing
    assert elo.rating("p") == 1032.0 and elo.rating("q") == 984.0 and elo.rating("r") == 984.0
    assert elo.record_of("q", "r").draws == 1
    other_order = Elo()
    other_order.record_match(["r", "q", "p"], [0.0, 0.0, 1.0])
    assert other_order.ratings == elo.ratings
    with pytest.raises(ValueError, match="3 players but 2 scores"):
        elo.record_match(["p", "q", "r"], [1.0, 0.0])


def test_a_player_against_itself_is_not_rated() -> None:
    elo = Elo()
    elo.record("policy_0", "policy_0", 1.0)
    assert elo.rating("policy_0") == 1000.0 and elo.table() == []


def test_scores_other_than_win_draw_loss_are_refused() -> None:
    with pytest.raises(ValueError, match=r"1 \(win\), 0.5 \(draw\) or 0 \(loss\)"):
        Elo().record("a", "b", 0.7)


def test_the_pair_table_counts_wins_draws_and_losses_from_either_side() -> None:
    elo = Elo()
    for score in (1.0, 1.0, 0.5, 0.0):
        elo.record("zed", "amy", score)
    zed, amy = elo.record_of("zed", "amy"), elo.record_of("amy", "zed")
    assert (zed.wins, zed.draws, zed.losses, zed.games) == (2, 1, 1, 4)
    assert (amy.a, amy.b, amy.wins, amy.draws, amy.losses) == ("amy", "zed", 1, 1, 2)
    elo.record("amy", "bob", 1.0)
    assert [(row.a, row.b, row.wins, row.losses) for row in elo.table()] == [("amy", "bob", 1, 0), ("amy", "zed", 1, 2)]
    assert elo.record_of("amy", "nobody").games == 0


def test_a_snapshot_added_at_its_learners_rating_keeps_a_rating_it_already_has() -> None:
    elo = Elo()
    elo.record("policy_0", "policy_1", 1.0)
    elo.add("policy_0@update10", elo.rating("policy_0"))
    assert elo.rating("policy_0@update10") == 1016.0
    elo.add("policy_0@update10", 0.0)
    assert elo.rating("policy_0@update10") == 1016.0


def test_the_state_is_plain_data_that_round_trips() -> None:
    elo = Elo(k=24, initial=1200)
    elo.record_match(["a", "b", "c"], [1.0, 0.5, 0.5])
    elo.record("c", "a", 1.0)
    buffer = io.BytesIO()
    torch.save(elo.to_dict(), buffer)
    buffer.seek(0)
    restored = Elo.from_dict(torch.load(buffer, weights_only=True))
    assert restored.to_dict() == elo.to_dict()
    assert (restored.k, restored.initial) == (24.0, 1200.0)
    assert restored.record_of("a", "c") == elo.record_of("a", "c")
    restored.record("a", "b", 1.0)
    elo.record("a", "b", 1.0)
    assert restored.ratings == elo.ratings
