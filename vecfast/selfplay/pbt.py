"""Population-based training (Jaderberg et al. 2017) with Sample Factory's rules, as decisions a trainer applies.

Why: a population trained side by side tunes its hyperparameters and reward shaping as it learns, instead of a
sweep of separate runs: the weakest policies take the weights of the strongest, and the others explore nearby
settings. A policy is due for a PBT step once it has ``pbt_start_mutation`` env steps of its own, then every
``pbt_period_env_steps`` more. The population is ranked by each policy's mean ``true_objective``: the top
``ceil(pbt_replace_fraction * N)`` are left as they are; each of the bottom as many copies the weights and settings of
a random top policy if it trails it by more than ``pbt_replace_reward_gap`` (relative) and
``pbt_replace_reward_gap_absolute``; every policy not on top then mutates: each hyperparameter and reward shaping
coefficient, with probability ``pbt_mutation_rate``, is multiplied or divided (even odds) by a factor drawn from
U(``pbt_perturb_min``, ``pbt_perturb_max``). The discount mutates only with ``pbt_optimize_gamma``, through
``1 - gamma`` so it stays below 1. The knobs are the population concern's ``pbt_*`` keys
(:class:`~vecfast.trainers.config.PopulationConfig`, Sample Factory's names), which also checks them.

The controller only decides: the trainer applies each :class:`PBTDecision` (copies ``source``'s weights and
optimiser state, sets the hyperparameters, which are :class:`~vecfast.trainers.config.TrainConfig` field names,
and passes the reward shaping to the env's ``set_reward_shaping``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from vecfast.trainers.config import PopulationConfig, TrainConfig

# The TrainConfig fields PBT tunes; "gamma" only with pbt_optimize_gamma.
HYPERPARAMETERS = (
    "learning_rate",
    "exploration_loss_coeff",
    "value_loss_coeff",
    "ppo_clip_ratio",
    "max_grad_norm",
    "gamma",
)
_EPS = 1e-6  # keeps the relative gap finite when the top objective is 0


def hyperparameters_of(cfg: TrainConfig) -> dict[str, float]:
    """``cfg``'s values of the hyperparameters PBT tunes: a population's starting point."""
    return {key: float(getattr(cfg, key)) for key in HYPERPARAMETERS}


@dataclass(frozen=True)
class PolicySettings:
    """A policy's hyperparameters (TrainConfig names) and its env's reward shaping coefficients; read-only (the
    controller replaces settings, it never changes them in place)."""

    hyperparameters: dict[str, float]
    reward_shaping: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PBTDecision:
    """One PBT step of ``policy`` at ``env_steps``: it takes ``source``'s weights if ``source`` is set (replaced),
    and ``after``'s settings; ``mutated`` says whether those differ from the ones it took (its own or ``source``'s).
    A top policy is kept: no source, not mutated."""

    policy: int
    env_steps: int
    objective: float
    source: int | None
    mutated: bool
    before: PolicySettings
    after: PolicySettings

    @property
    def replaced(self) -> bool:
        return self.source is not None


class PBTController:
    """The PBT state of ``num_policies`` policies that all start from ``hyperparameters`` and ``reward_shaping``."""

    def __init__(
        self,
        num_policies: int,
        hyperparameters: Mapping[str, float],
        reward_shaping: Mapping[str, float] | None = None,
        config: PopulationConfig | None = None,
        seed: int | None = None,
    ) -> None:
        if num_policies < 1:
            raise ValueError(f"num_policies must be >= 1, got {num_policies}")
        unknown = sorted(set(hyperparameters) - set(HYPERPARAMETERS))
        if unknown:
            raise ValueError(f"PBT does not tune {unknown}; it tunes {list(HYPERPARAMETERS)}")
        self.num_policies = num_policies
        self.config = config or PopulationConfig()
        self.rng = np.random.default_rng(seed)
        self._settings = [
            PolicySettings(dict(hyperparameters), dict(reward_shaping or {})) for _ in range(num_policies)
        ]
        self._last_step = [0] * num_policies  # env steps at each policy's last PBT step

    def settings(self, policy: int) -> PolicySettings:
        return self._settings[policy]

    def due(self, policy: int, env_steps: int) -> bool:
        """Whether ``policy``, with ``env_steps`` env steps of its own, is up for a PBT step."""
        cfg = self.config
        return env_steps >= cfg.pbt_start_mutation and env_steps - self._last_step[policy] >= cfg.pbt_period_env_steps

    def update(self, policy: int, env_steps: int, objectives: Sequence[float]) -> PBTDecision | None:
        """``policy``'s PBT step if it is :meth:`due` (else None), ranking by ``objectives``: each policy's mean
        ``true_objective`` over its recent episodes."""
        if len(objectives) != self.num_policies:
            raise ValueError(f"{len(objectives)} objectives for {self.num_policies} policies")
        if not self.due(policy, env_steps):
            return None
        self._last_step[policy] = env_steps
        ranked = sorted(range(self.num_policies), key=lambda p: objectives[p], reverse=True)
        count = math.ceil(self.config.pbt_replace_fraction * self.num_policies)
        before = self._settings[policy]
        source = None
        if policy in ranked[:count]:
            after = before
        else:
            if policy in ranked[-count:]:
                candidate = ranked[int(self.rng.integers(count))]
                if self._far_behind(objectives[policy], objectives[candidate]):
                    source = candidate
            taken = self._settings[policy if source is None else source]
            after = self._mutated(taken)
        self._settings[policy] = after
        mutated = after != (before if source is None else self._settings[source])
        return PBTDecision(policy, env_steps, float(objectives[policy]), source, mutated, before, after)

    def _far_behind(self, objective: float, top: float) -> bool:
        gap = top - objective
        relative = abs(gap) / (abs(top) + _EPS)
        return gap > self.config.pbt_replace_reward_gap_absolute and relative > self.config.pbt_replace_reward_gap

    def _mutated(self, settings: PolicySettings) -> PolicySettings:
        hyperparameters = {key: self._mutated_value(key, value) for key, value in settings.hyperparameters.items()}
        shaping = {key: value * self._factor() for key, value in settings.reward_shaping.items()}
        return PolicySettings(hyperparameters, shaping)

    def _mutated_value(self, key: str, value: float) -> float:
        if key != "gamma":
            return value * self._factor()
        if not self.config.pbt_optimize_gamma:
            return value
        factor = self._factor()
        return value if factor == 1.0 else 1.0 - min((1.0 - value) * factor, 1.0)  # gamma stays in [0, 1)

    def _factor(self) -> float:
        """1 (with probability ``1 - pbt_mutation_rate``), else U(pbt_perturb_min, pbt_perturb_max) or its
        inverse."""
        cfg = self.config
        if self.rng.random() >= cfg.pbt_mutation_rate:
            return 1.0
        factor = self.rng.uniform(cfg.pbt_perturb_min, cfg.pbt_perturb_max)
        return factor if self.rng.random() < 0.5 else 1.0 / factor

    def state_dict(self) -> dict[str, Any]:
        """Plain data for a ``weights_only=True`` checkpoint: every policy's settings and last PBT step, and the
        generator's state."""
        return {
            "settings": [asdict(s) for s in self._settings],
            "last_step": list(self._last_step),
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if len(state["settings"]) != self.num_policies:
            raise ValueError(f"the saved population has {len(state['settings'])} policies, not {self.num_policies}")
        self._settings = [
            PolicySettings(dict(s["hyperparameters"]), dict(s["reward_shaping"])) for s in state["settings"]
        ]
        self._last_step = [int(step) for step in state["last_step"]]
        self.rng.bit_generator.state = state["rng"]
