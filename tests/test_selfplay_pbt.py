"""The PBT controller's rules (Sample Factory's): who is kept, who copies whom, how settings mutate, when a
policy is due, and a state that restores the same decisions."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
import torch

from vecfast.selfplay import (
    HYPERPARAMETERS,
    PBTController,
    PBTDecision,
    PolicySettings,
    hyperparameters_of,
)
from vecfast.trainers.config import PopulationConfig, TrainConfig

SHAPING = {"frag": 1.0, "death": -0.5, "damage_dealt": 0.01}  # some of the Doom full game's coefficients
TOP, MIDDLE, BOTTOM = (7, 8, 9), (3, 4, 5, 6), (0, 1, 2)  # of 10 policies ranked by RANKED
RANKED = [float(p) for p in range(10)]  # policy p's objective is p: far apart


def controller(num_policies: int = 10, seed: int = 0, **config) -> PBTController:
    options = {"pbt_period_env_steps": 1000, "pbt_start_mutation": 2000, **config}
    return PBTController(num_policies, hyperparameters_of(TrainConfig()), SHAPING, PopulationConfig(**options), seed)


def run(pbt: PBTController, policy: int, objectives: list[float], periods: int) -> Iterator[PBTDecision]:
    """``policy``'s decisions at each of its next ``periods`` PBT steps, each made when the caller asks for it."""
    for period in range(periods):
        decision = pbt.update(policy, 2000 + 1000 * period, objectives)
        assert decision is not None
        yield decision


def values(settings: PolicySettings) -> dict[str, float]:
    """Hyperparameters and reward shaping coefficients in one dict."""
    return {**settings.hyperparameters, **{f"shaping/{k}": v for k, v in settings.reward_shaping.items()}}


def test_the_hyperparameters_are_train_config_fields_that_a_trainer_can_apply() -> None:
    cfg = TrainConfig()
    assert hyperparameters_of(cfg) == {key: getattr(cfg, key) for key in HYPERPARAMETERS}
    decision = next(run(controller(pbt_mutation_rate=1.0), MIDDLE[0], RANKED, 1))
    applied = TrainConfig.from_overrides(cfg, **decision.after.hyperparameters)
    assert applied.learning_rate == decision.after.hyperparameters["learning_rate"] != cfg.learning_rate
    with pytest.raises(ValueError, match=r"PBT does not tune \['rollout'\]"):
        PBTController(2, {"rollout": 32})


def test_the_top_30_percent_is_kept_as_it_is() -> None:
    pbt = controller(pbt_mutation_rate=1.0)
    initial = pbt.settings(0)
    for policy in TOP:
        for decision in run(pbt, policy, RANKED, 20):
            assert not decision.replaced and not decision.mutated
            assert decision.before == decision.after == initial
        assert pbt.settings(policy) == initial


def set_learning_rates(pbt: PBTController, rates: dict[int, float]) -> None:
    """Give some policies settings of their own (through the plain-data state, as a checkpoint would)."""
    state = pbt.state_dict()
    for policy, rate in rates.items():
        state["settings"][policy]["hyperparameters"]["learning_rate"] = rate
    pbt.load_state_dict(state)


def test_the_bottom_copies_a_random_top_policy_when_it_trails_by_more_than_10_percent() -> None:
    pbt = controller(pbt_mutation_rate=0.0)
    set_learning_rates(pbt, {7: 0.7, 8: 0.8, 9: 0.9})
    # top 10.0; policy 0 trails by 11% (replaced), policies 1 and 2 by 9% (kept, and mutated, at rate 0 not at all)
    objectives = [8.9, 9.1, 9.1, 9.5, 9.5, 9.5, 9.5, 10.0, 10.0, 10.0]
    sources = set()
    for decision in run(pbt, 0, objectives, 30):
        assert decision.replaced and decision.source in TOP and not decision.mutated
        assert decision.after == pbt.settings(decision.source) == pbt.settings(0)
        sources.add(decision.source)
    assert sources == set(TOP)  # the top policy to copy is drawn at random
    for policy in (1, 2):
        for decision in run(pbt, policy, objectives, 10):
            assert not decision.replaced and decision.after == decision.before


def test_the_absolute_gap_must_be_exceeded_too() -> None:
    objectives = [0.0] + [1.5] * 6 + [2.0] * 3  # policy 0 trails the top by 2.0: 100% relative
    assert next(run(controller(pbt_replace_reward_gap_absolute=1.9), 0, objectives, 1)).replaced
    assert not next(run(controller(pbt_replace_reward_gap_absolute=2.1), 0, objectives, 1)).replaced


def test_the_middle_only_mutates_its_hyperparameters_and_reward_shaping() -> None:
    pbt = controller(pbt_mutation_rate=1.0)
    for policy in MIDDLE:  # far behind the top, yet never replaced
        for decision in run(pbt, policy, RANKED, 5):
            assert not decision.replaced and decision.mutated
            before, after = values(decision.before), values(decision.after)
            changed = {key for key in before if after[key] != before[key]}
            assert changed == set(before) - {"gamma"}
            assert all(1.1 <= max(after[k] / before[k], before[k] / after[k]) <= 1.5 for k in changed)
            assert after["shaping/death"] < 0  # a factor keeps the sign: a penalty stays a penalty
            assert pbt.settings(policy) == decision.after


def test_each_value_mutates_with_probability_0_15_by_a_factor_in_1_1_to_1_5_either_way() -> None:
    pbt = controller()
    trials, ups, downs = 0, [], []
    for decision in run(pbt, MIDDLE[1], RANKED, 500):
        before, after = values(decision.before), values(decision.after)
        for key in set(before) - {"gamma"}:
            trials += 1
            ratio = after[key] / before[key]
            if ratio > 1:
                ups.append(ratio)
            elif ratio < 1:
                downs.append(1 / ratio)
    assert (len(ups) + len(downs)) / trials == pytest.approx(0.15, abs=0.02)  # 4000 trials: sd 0.006
    assert len(ups) / (len(ups) + len(downs)) == pytest.approx(0.5, abs=0.08)
    for factors in (ups, downs):  # spread over the whole range, not one fixed factor
        assert 1.1 <= min(factors) < 1.13 and 1.47 < max(factors) <= 1.5


def test_gamma_mutates_only_when_enabled_and_through_1_minus_gamma() -> None:
    assert all(d.after.hyperparameters["gamma"] == 0.99 for d in run(controller(pbt_mutation_rate=1.0), 4, RANKED, 20))
    pbt = controller(pbt_mutation_rate=1.0, pbt_optimize_gamma=True)
    for decision in run(pbt, 4, RANKED, 50):
        before, after = decision.before.hyperparameters["gamma"], decision.after.hyperparameters["gamma"]
        assert 0.0 <= after < 1.0
        horizon_ratio = (1 - after) / (1 - before)
        assert 1.1 - 1e-9 <= max(horizon_ratio, 1 / horizon_ratio) <= 1.5 + 1e-9


def test_a_policy_is_due_after_the_start_delay_then_once_a_period_of_its_own_steps() -> None:
    pbt = controller(pbt_period_env_steps=1000, pbt_start_mutation=2500)
    assert not pbt.due(4, 2499) and pbt.update(4, 2499, RANKED) is None  # 2499 >= a period, but before the delay
    assert pbt.update(4, 2500, RANKED) is not None
    assert not pbt.due(4, 3499) and pbt.update(4, 3499, RANKED) is None
    assert pbt.due(4, 3500)
    assert pbt.due(5, 2500)  # each policy by its own steps
    with pytest.raises(ValueError, match="9 objectives for 10 policies"):
        pbt.update(4, 3500, RANKED[:9])


def decisions_of(pbt: PBTController, first_step: int) -> list[PBTDecision | None]:
    objectives = [0.0, 5.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0]
    return [pbt.update(p, first_step + 1000 * k, objectives) for k in range(10) for p in range(10)]


def test_the_seed_makes_the_decisions_reproducible() -> None:
    assert decisions_of(controller(seed=7, pbt_mutation_rate=0.5), 2000) == decisions_of(
        controller(seed=7, pbt_mutation_rate=0.5), 2000
    )
    assert decisions_of(controller(seed=7, pbt_mutation_rate=0.5), 2000) != decisions_of(
        controller(seed=8, pbt_mutation_rate=0.5), 2000
    )


def test_a_restored_controller_makes_the_same_next_decisions() -> None:
    original = controller(seed=3, pbt_mutation_rate=0.5)
    decisions_of(original, 2000)
    buffer = io.BytesIO()
    torch.save(original.state_dict(), buffer)  # a population checkpoint, loaded with weights_only=True
    buffer.seek(0)
    restored = controller(seed=99, pbt_mutation_rate=0.5)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert [restored.settings(p) for p in range(10)] == [original.settings(p) for p in range(10)]
    assert not restored.due(0, 11_999) and restored.due(0, 12_000)  # the last PBT steps came back too
    assert decisions_of(restored, 12_000) == decisions_of(original, 12_000)
    with pytest.raises(ValueError, match="10 policies, not 4"):
        controller(num_policies=4).load_state_dict(original.state_dict())


def test_bad_configs_are_refused() -> None:
    for keys, message in [({"pbt_replace_fraction": 0.6}, "pbt_replace_fraction"),
                          ({"pbt_perturb_min": 1.6}, "pbt_perturb_min <= pbt_perturb_max"),
                          ({"pbt_mutation_rate": 1.5}, "pbt_mutation_rate"),
                          ({"pbt_period_env_steps": 0}, "pbt_period_env_steps")]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            TrainConfig.from_overrides(**keys)
