"""The opponent snapshot pool: who is drawn, when snapshots are taken, that they are frozen and independent of
the learner, the bound on built modules, files readable with weights_only=True, and plain-data state."""

from __future__ import annotations

import io
import weakref
from pathlib import Path

import pytest
import torch
from torch import nn

from vecfast.selfplay import Elo, SnapshotPool


def linear() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def learner(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return linear()


def train_a_little(model: nn.Module) -> None:
    """An optimiser step, as a trainer would take between snapshots: changes the weights in place."""
    optimiser = torch.optim.SGD(model.parameters(), lr=0.5)
    model(torch.ones(3, 4)).square().sum().backward()
    optimiser.step()
    optimiser.zero_grad()


def weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


def assert_same_weights(model: nn.Module, expected: dict[str, torch.Tensor]) -> None:
    actual = model.state_dict()
    assert actual.keys() == expected.keys()
    assert all(torch.equal(actual[key], expected[key]) for key in expected)


def pool(model: nn.Module, **kwargs) -> SnapshotPool:
    options = {"snapshot_every_updates": None, "win_rate_threshold": None, "seed": 0, **kwargs}
    return SnapshotPool(model, linear, **options)


def test_draws_the_latest_80_percent_of_the_time_and_past_snapshots_uniformly() -> None:
    model = learner()
    snapshots = pool(model)
    assert all(snapshots.draw().latest for _ in range(50))  # nothing to draw but the latest yet
    for update in (10, 20, 30, 40):
        snapshots.snapshot(update)
    draws = [snapshots.draw() for _ in range(8000)]
    latest = [d for d in draws if d.latest]
    assert len(latest) / len(draws) == pytest.approx(0.8, abs=0.02)
    assert all(d.name == "policy_0" and d.model is model for d in latest)
    for update in (10, 20, 30, 40):  # 20% over 4 snapshots: 5% each
        share = sum(d.name == f"policy_0@update{update}" for d in draws) / len(draws)
        assert share == pytest.approx(0.05, abs=0.01)
    even = pool(model, latest_probability=0.5)
    even.snapshot(10)
    assert sum(even.draw().latest for _ in range(4000)) / 4000 == pytest.approx(0.5, abs=0.03)


def test_a_snapshot_is_taken_every_k_updates() -> None:
    snapshots = pool(learner(), snapshot_every_updates=10)
    taken = [snapshot for update in range(1, 36) if (snapshot := snapshots.on_update(update)) is not None]
    assert [(s.name, s.update, s.reason) for s in taken] == [
        ("policy_0@update10", 10, "every_updates"),
        ("policy_0@update20", 20, "every_updates"),
        ("policy_0@update30", 30, "every_updates"),
    ]
    assert list(snapshots.snapshots) == [s.name for s in taken]


def test_a_snapshot_is_taken_once_the_win_rate_against_the_pool_reaches_the_threshold() -> None:
    snapshots = pool(learner(), win_rate_threshold=0.7, win_rate_games=10)
    first = snapshots.snapshot(0).name
    for _ in range(50):  # self-play games say nothing about outgrowing the pool
        snapshots.record("policy_0", 1.0)
    assert snapshots.win_rate() is None and snapshots.on_update(1) is None
    for score in [0.0] * 4 + [1.0] * 6:
        snapshots.record(first, score)
    assert snapshots.win_rate() == pytest.approx(0.6) and snapshots.on_update(2) is None
    snapshots.record(first, 0.5)  # the window slides: the oldest loss drops out
    assert snapshots.win_rate() == pytest.approx(0.65) and snapshots.on_update(3) is None
    snapshots.record(first, 0.5)  # 0 0 1 1 1 1 1 1 0.5 0.5: 0.7, the threshold
    assert snapshots.win_rate() == 0.7
    taken = snapshots.on_update(4)
    assert taken is not None and (taken.name, taken.reason) == ("policy_0@update4", "win_rate")
    assert snapshots.win_rate() is None  # a new pool, a new window
    with pytest.raises(KeyError, match="neither 'policy_0' nor one of its snapshots"):
        snapshots.record("policy_1@update0", 1.0)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        snapshots.record(first, 2.0)


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "disk"])
def test_snapshots_are_frozen_and_share_nothing_with_the_learner(on_disk: bool, tmp_path: Path) -> None:
    model = learner()
    snapshots = pool(model, directory=tmp_path if on_disk else None)
    saved = weights(model)
    name = snapshots.snapshot(1).name
    frozen = snapshots.model(name)
    assert not frozen.training and not any(p.requires_grad for p in frozen.parameters())
    learner_storage = {p.untyped_storage().data_ptr() for p in model.parameters()}
    assert not learner_storage & {p.untyped_storage().data_ptr() for p in frozen.parameters()}
    train_a_little(model)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    assert not torch.equal(model.state_dict()["0.weight"], saved["0.weight"])
    assert_same_weights(frozen, saved)
    snapshots.max_loaded = 1
    snapshots.snapshot(2)
    snapshots.model("policy_0@update2")  # evicts update1: the next call builds it again from its stored weights
    assert_same_weights(snapshots.model(name), saved)


def test_at_most_max_loaded_modules_are_built_and_a_reloaded_snapshot_is_bit_identical(tmp_path: Path) -> None:
    model = learner()
    built: list[weakref.ref[nn.Module]] = []

    def factory() -> nn.Module:
        module = linear()
        built.append(weakref.ref(module))
        return module

    snapshots = SnapshotPool(
        model, factory, directory=tmp_path, snapshot_every_updates=None, win_rate_threshold=None, max_loaded=2
    )
    saved = {}
    for update in range(1, 6):
        saved[f"policy_0@update{update}"] = weights(model)
        snapshots.snapshot(update)
        train_a_little(model)
    for name in ["policy_0@update1", "policy_0@update2", "policy_0@update1", "policy_0@update3"] * 3 + list(saved):
        assert_same_weights(snapshots.model(name), saved[name])
        # modules hold no reference cycles: an evicted one is freed at once, so counting the live ones needs no gc
        assert len(snapshots.loaded) <= 2 and sum(ref() is not None for ref in built) <= 2
    built.clear()
    snapshots.model("policy_0@update5")  # loaded: a cache hit builds nothing
    assert built == [] and snapshots.loaded == ["policy_0@update4", "policy_0@update5"]
    snapshots.model("policy_0@update1")  # evicted: built again, evicting the least recently used (update4)
    assert len(built) == 1 and snapshots.loaded == ["policy_0@update5", "policy_0@update1"]


def test_snapshot_files_hold_a_state_dict_that_loads_with_weights_only(tmp_path: Path) -> None:
    model = learner()
    snapshots = pool(model, directory=tmp_path / "pool", snapshot_every_updates=5)
    saved = weights(model)
    for update in range(1, 6):
        snapshots.on_update(update)
    assert sorted(p.name for p in (tmp_path / "pool").iterdir()) == ["policy_0@update5.pt"]
    loaded = torch.load(tmp_path / "pool" / "policy_0@update5.pt", weights_only=True)
    assert loaded.keys() == saved.keys() and all(torch.equal(loaded[k], saved[k]) for k in saved)


def test_the_seed_makes_the_draws_reproducible() -> None:
    def names(seed: int) -> list[str]:
        snapshots = pool(learner(), seed=seed, latest_probability=0.5)
        for update in range(1, 4):
            snapshots.snapshot(update)
        return [snapshots.draw().name for _ in range(200)]

    assert names(3) == names(3)
    assert names(3) != names(4)


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "disk"])
def test_the_state_is_plain_data_and_a_restored_pool_carries_on_as_the_original(on_disk: bool, tmp_path: Path) -> None:
    model = learner()
    directory = tmp_path if on_disk else None
    original = pool(model, directory=directory, latest_probability=0.3, win_rate_threshold=0.9, win_rate_games=4)
    saved = {}
    for update in (1, 2, 3):
        saved[original.snapshot(update).name] = weights(model)
        train_a_little(model)
    for _ in range(3):
        original.draw()
    original.record("policy_0@update2", 1.0)
    buffer = io.BytesIO()
    torch.save(original.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    assert ("policy_0@update1" in state["weights"]) is not on_disk  # files stay files
    restored = pool(
        model, directory=directory, seed=99, latest_probability=0.3, win_rate_threshold=0.9, win_rate_games=4
    )
    restored.load_state_dict(state)
    assert restored.snapshots == original.snapshots
    for name, expected in saved.items():
        assert_same_weights(restored.model(name), expected)
    assert [restored.draw().name for _ in range(100)] == [original.draw().name for _ in range(100)]
    for pool_ in (original, restored):  # the window survives too: three more wins reach 0.9 over 4 games
        for _ in range(3):
            pool_.record("policy_0@update2", 1.0)
        taken = pool_.on_update(4)
        assert taken is not None and taken.reason == "win_rate"
    with pytest.raises(ValueError, match="'policy_0''s, not 'policy_1''s"):
        SnapshotPool(model, linear, name="policy_1", directory=directory).load_state_dict(state)
    if on_disk:
        (tmp_path / "policy_0@update1.pt").unlink()
        with pytest.raises(FileNotFoundError, match="policy_0@update1"):
            pool(model, directory=directory).load_state_dict(state)


def test_the_pool_rates_its_games_with_elo() -> None:
    elo = Elo()
    snapshots = pool(learner(), elo=elo)
    elo.record("policy_0", "policy_1", 1.0)  # the learner is at 1016 when the snapshot is taken
    name = snapshots.snapshot(10).name
    assert name == "policy_0@update10" and elo.rating(name) == 1016.0
    snapshots.record("policy_0", 1.0)  # against itself: not rated
    assert elo.rating("policy_0") == 1016.0
    snapshots.record(name, 1.0)  # equal ratings: +16
    assert elo.rating("policy_0") == 1032.0 and elo.rating(name) == 1000.0
    assert elo.record_of("policy_0", name).wins == 1


def test_pfsp_draws_the_snapshots_that_beat_the_learner_and_keeps_the_latest_in_the_mix() -> None:
    """AlphaStar's weighting by the learner's win rate x against each snapshot: hard (1 - x)^2, var x (1 - x)."""
    model = learner()
    hard = pool(model, sampling="pfsp_hard", latest_probability=0.5)
    for update in (10, 20, 30):
        hard.snapshot(update)
    fresh = hard.draw_probabilities()
    assert fresh.tolist() == pytest.approx([1 / 3] * 3)  # no games yet: every snapshot counts as even
    for _ in range(40):  # it loses to the first, is even with the second, beats the third
        hard.record("policy_0@update10", 0.0)
        hard.record("policy_0@update20", 0.5)
        hard.record("policy_0@update30", 1.0)
    assert hard.win_rates() == pytest.approx([0.5 / 41, 0.5, 40.5 / 41])
    expected = (1 - hard.win_rates()) ** 2
    assert hard.draw_probabilities() == pytest.approx(expected / expected.sum())
    draws = [hard.draw() for _ in range(6000)]
    assert sum(d.latest for d in draws) / len(draws) == pytest.approx(0.5, abs=0.03)  # the latest keeps its share
    drawn = [d.name for d in draws if not d.latest]
    assert drawn.count("policy_0@update10") / len(drawn) == pytest.approx(expected[0] / expected.sum(), abs=0.03)
    assert hard.draws["policy_0@update10"] == drawn.count("policy_0@update10")
    var = pool(model, sampling="pfsp_var")
    var.snapshot(10)
    var.snapshot(20)
    for _ in range(40):
        var.record("policy_0@update10", 0.5)
        var.record("policy_0@update20", 1.0)
    assert var.draw_probabilities()[0] > 0.9  # the even one, not the beaten one
    restored = pool(model, sampling="pfsp_hard")
    restored.load_state_dict(hard.state_dict())
    assert restored.win_rates() == pytest.approx(hard.win_rates()) and restored.draws == hard.draws
    with pytest.raises(ValueError, match="sampling must be one of"):
        pool(model, sampling="hardest")


@pytest.mark.parametrize("on_disk", [False, True], ids=["in memory", "on disk"])
def test_the_pool_keeps_at_most_max_snapshots_and_lets_go_of_the_one_the_learner_beats_most(
    on_disk: bool, tmp_path: Path
) -> None:
    """A run of days took a snapshot every few seconds and kept every one, in memory and in every checkpoint (a
    connect-four run's grew from 164 MB at 10 minutes to 447 MB at 30)."""
    model = learner()
    pool = SnapshotPool(model, linear, directory=tmp_path if on_disk else None, snapshot_every_updates=None,
                        win_rate_threshold=None, max_snapshots=3, elo=Elo(), seed=0)  # fmt: skip
    names = []
    for update in (1, 2, 3):
        train_a_little(model)
        names.append(pool.snapshot(update).name)
    for score in (1.0, 1.0, 1.0):  # beaten every time: the first one leaves first
        pool.record(names[0], score)
    pool.record(names[1], 0.0)  # beats the learner: stays
    draw_during_a_game = names[0]
    train_a_little(model)
    names.append(pool.snapshot(4).name)
    assert list(pool.snapshots) == [names[1], names[2], names[3]]
    assert names[0] not in pool.draws and len(pool.win_rates()) == 3
    if on_disk:
        assert sorted(p.stem for p in tmp_path.glob("*.pt")) == sorted(names[1:])
    pool.record(draw_during_a_game, 1.0)  # a game begun against it still ends, rated in Elo
    assert pool.elo.rating(pool.name) > 1000
    for update in range(5, 20):
        train_a_little(model)
        pool.snapshot(update)
    assert len(pool.snapshots) == 3 and names[1] in pool.snapshots  # the one that beats it stays
    restored = SnapshotPool(learner(1), linear, directory=tmp_path if on_disk else None, max_snapshots=3)
    restored.load_state_dict(pool.state_dict())
    assert list(restored.snapshots) == list(pool.snapshots)
    restored.record(draw_during_a_game, 0.5)  # still known as one that left
    with pytest.raises(KeyError):
        pool.record("policy_0@update999", 1.0)
