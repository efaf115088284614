"""MultiAgentVectorEnv / pettingzoo_to_vector: PettingZoo matches as one flat vector env of agent slots.

Every step is compared with the same PettingZoo ParallelEnvs stepped directly (same seeds,
same actions) under the promised semantics: slot ``m * num_agents + a`` is agent ``a`` of
match ``m``; a match that ends resets on its next step (NEXT_STEP); an agent that ends
before the others repeats its final flag with reward 0 and its last observation until the
match resets, and its actions are ignored. Envs: Knights-Archers-Zombies (agents die early,
Box observations) and rock-paper-scissors (Discrete observations, all agents end together).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import psutil
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from helpers import descendants, shm_entries, shm_files_used_by, wait_gone
from pettingzoo.butterfly import knights_archers_zombies_v11
from pettingzoo.classic import rps_v2
from pettingzoo.test.example_envs import generated_agents_parallel_v0
from pettingzoo.utils.wrappers import BaseParallelWrapper
from stable_baselines3 import PPO

from vecfast.multiagent import MultiAgentVectorEnv
from vecfast.vector import EnvError, InvalidActionError
from vecfast.wrappers.pettingzoo import pettingzoo_to_vector
from vecfast.wrappers.sb3 import SB3VecEnv

pytestmark = pytest.mark.usefixtures("scratch_in_tmp_path")  # SB3 leaves SB3-<time> in the temp dir

# Agents die when they touch the top or bottom wall: with random actions some die early.
kaz = functools.partial(knights_archers_zombies_v11.parallel_env, max_cycles=60, line_death=True)
rps = functools.partial(rps_v2.parallel_env, max_cycles=7)


class AgentInfos(BaseParallelWrapper):
    """Adds a per-agent info (the step count) on every third step, for some agents only."""

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.t = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: dict[Any, Any]) -> Any:
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        self.t += 1
        if self.t % 3 == 0:
            infos = {**infos, self.possible_agents[self.t % 2]: {"t": self.t}}
        return observations, rewards, terminations, truncations, infos


class OtherActionSpace(BaseParallelWrapper):
    """Gives the last agent a different action space."""

    def action_space(self, agent: Any) -> spaces.Space:
        return spaces.Discrete(4) if agent == self.possible_agents[-1] else self.env.action_space(agent)


class Revive(BaseParallelWrapper):
    """Keeps returning observations of agents that have ended, which fixed slots cannot hold."""

    def step(self, actions: dict[Any, Any]) -> Any:
        observations, *rest = self.env.step(actions)
        last = getattr(self, "last", {})
        self.last = {**last, **observations}
        return (self.last, *rest)


# ---------------------------------------------------------------------------- the reference


class DirectMatches:
    """The same ParallelEnvs stepped directly, producing what the vector env must return."""

    def __init__(self, env_fns: list[Callable[[], Any]]) -> None:
        self.envs = [fn() for fn in env_fns]
        self.agents = list(self.envs[0].possible_agents)
        n = len(self.agents)
        self.obs: list[list[Any]] = [[None] * n for _ in self.envs]
        self.flags = np.zeros((len(self.envs), n, 2), np.bool_)
        self.over = [False] * len(self.envs)

    def reset(self, seed: int) -> np.ndarray:
        for m in range(len(self.envs)):
            self.start(m, seed + m)
        return self.observations()

    def observations(self) -> np.ndarray:
        return np.array([o for row in self.obs for o in row])

    def start(self, m: int, seed: int | None) -> dict[int, dict[str, Any]]:
        observations, infos = self.envs[m].reset(seed=seed)
        self.obs[m] = [observations[a] for a in self.agents]
        self.flags[m] = False
        self.over[m] = False
        return {m * len(self.agents) + i: infos[a] for i, a in enumerate(self.agents) if infos.get(a)}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, ...]:
        n = len(self.agents)
        rewards = np.zeros((len(self.envs), n))
        active = np.zeros((len(self.envs), n), np.bool_)
        infos: dict[int, dict[str, Any]] = {}
        for m, env in enumerate(self.envs):
            if self.over[m]:
                infos.update(self.start(m, None))
                continue
            playing = list(env.agents)
            step_actions = {a: actions[m * n + i] for i, a in enumerate(self.agents) if a in playing}
            observations, step_rewards, terminations, truncations, step_infos = env.step(step_actions)
            for i, a in enumerate(self.agents):
                if step_infos.get(a):  # passed on even for an agent that has ended
                    infos[m * n + i] = step_infos[a]
                if a not in playing:
                    continue
                active[m, i] = True
                self.obs[m][i] = observations[a]
                rewards[m, i] = step_rewards[a]
                self.flags[m, i] = terminations[a], truncations[a]
            self.over[m] = not env.agents
        flags = self.flags.reshape(-1, 2)
        terminated, truncated = flags[:, 0].copy(), flags[:, 1].copy()
        return self.observations(), rewards.reshape(-1), terminated, truncated, active.reshape(-1), infos

    def close(self) -> None:
        for env in self.envs:
            env.close()


def slot_infos(infos: dict[str, Any], skip: tuple[str, ...] = ("agent_id", "match_id", "active")) -> dict[int, dict]:
    """gymnasium's batched infos back as {slot: info} for the slots that have one."""
    out: dict[int, dict[str, Any]] = {}
    for key, value in infos.items():
        if key in skip or key.startswith("_"):
            continue
        for slot in np.flatnonzero(infos[f"_{key}"]).tolist():
            out.setdefault(slot, {})[key] = value[slot].item()
    return out


@pytest.fixture
def make_multi(process_guard: Any) -> Iterator[Callable[..., MultiAgentVectorEnv]]:
    created: list[MultiAgentVectorEnv] = []

    def make(env_fns: list[Callable[[], Any]], **kwargs: Any) -> MultiAgentVectorEnv:
        env = MultiAgentVectorEnv(env_fns, **kwargs)
        created.append(env)
        process_guard.watch(descendants())
        return env

    yield make
    for env in created:
        env.close(timeout=2.0)


# ---------------------------------------------------------------------------- tests


@pytest.mark.parametrize(
    ("env_fn", "steps", "agents_die"),
    [(lambda: AgentInfos(kaz()), 200, True), (lambda: AgentInfos(rps()), 40, False)],
    ids=["kaz", "rps"],
)
def test_steps_equal_direct_pettingzoo(make_multi: Callable, env_fn: Callable, steps: int, agents_die: bool) -> None:
    num_matches = 3
    env = make_multi([env_fn] * num_matches, num_workers=2)
    direct = DirectMatches([env_fn] * num_matches)
    n = len(direct.agents)
    assert env.num_agents == n and env.num_envs == num_matches * n
    assert env.single_action_space == direct.envs[0].action_space(direct.agents[0])
    assert env.single_observation_space == direct.envs[0].observation_space(direct.agents[0])
    assert env.agent_ids.tolist() == direct.agents * num_matches
    assert env.match_ids.tolist() == np.repeat(np.arange(num_matches), n).tolist()

    obs, infos = env.reset(seed=11)
    np.testing.assert_array_equal(obs, direct.reset(seed=11))
    assert infos["agent_id"].tolist() == direct.agents * num_matches
    assert infos["match_id"].tolist() == env.match_ids.tolist()
    rng = np.random.default_rng(0)
    early_ends = match_ends = 0
    for t in range(steps):
        actions = rng.integers(0, env.single_action_space.n, env.num_envs)  # dead agents' rows too
        got = env.step(actions)
        want_obs, want_rewards, want_terminated, want_truncated, want_active, want_infos = direct.step(actions)
        obs, rewards, terminated, truncated, infos = got
        np.testing.assert_array_equal(obs, want_obs, err_msg=f"step {t}")
        assert obs.dtype == env.observation_space.dtype and rewards.dtype == np.float64
        np.testing.assert_array_equal(rewards, want_rewards, err_msg=f"step {t}")
        np.testing.assert_array_equal(terminated, want_terminated, err_msg=f"step {t}")
        np.testing.assert_array_equal(truncated, want_truncated, err_msg=f"step {t}")
        np.testing.assert_array_equal(infos["active"], want_active, err_msg=f"step {t}")
        assert slot_infos(infos) == want_infos, f"step {t}"
        assert infos["agent_id"].tolist() == direct.agents * num_matches
        done = (terminated | truncated).reshape(num_matches, n)
        early_ends += int((done.any(axis=1) & ~done.all(axis=1)).sum())
        match_ends += int(done.all(axis=1).sum())
    assert match_ends >= num_matches, "the test must cover autoresets"
    if agents_die:
        assert early_ends > 0, "the test must cover agents that end before their match"
    direct.close()


def test_send_and_recv_of_some_matches_equal_direct_pettingzoo(make_multi: Callable) -> None:
    """EnvPool's API over whole matches: match 0 and matches 1-2 sent and received apart give what playing the
    PettingZoo envs directly gives; a send that cuts a match is refused."""
    env_fn = lambda: AgentInfos(kaz())  # noqa: E731
    env = make_multi([env_fn] * 3, num_workers=2)
    direct = DirectMatches([env_fn] * 3)
    n = len(direct.agents)
    env.async_reset(seed=11)
    obs, _, _, _, infos = env.recv()
    assert infos["env_id"].tolist() == list(range(3 * n))
    np.testing.assert_array_equal(obs, direct.reset(seed=11))
    with pytest.raises(ValueError, match="cut match 0"):
        env.send(np.zeros(1, np.int64), [0])
    rng = np.random.default_rng(0)
    groups = [np.arange(n), np.arange(n, 3 * n)]  # match 0, matches 1 and 2
    for t in range(80):
        actions = rng.integers(0, env.single_action_space.n, env.num_envs)
        got: dict[str, np.ndarray] = {}
        for group in groups:
            env.send(actions[group], group)
        for group in groups:
            obs, rewards, terminated, truncated, infos = env.recv()
            ids = infos["env_id"]
            assert ids.tolist() == group.tolist()  # whole matches, in slot order
            for name, value in (("obs", obs), ("rewards", rewards), ("terminated", terminated),
                                ("truncated", truncated), ("active", infos["active"])):  # fmt: skip
                got.setdefault(name, np.zeros((env.num_envs, *value.shape[1:]), value.dtype))[ids] = value
        want_obs, want_rewards, want_terminated, want_truncated, want_active, _ = direct.step(actions)
        np.testing.assert_array_equal(got["obs"], want_obs, err_msg=f"step {t}")
        np.testing.assert_array_equal(got["rewards"], want_rewards, err_msg=f"step {t}")
        np.testing.assert_array_equal(got["terminated"], want_terminated, err_msg=f"step {t}")
        np.testing.assert_array_equal(got["truncated"], want_truncated, err_msg=f"step {t}")
        np.testing.assert_array_equal(got["active"], want_active, err_msg=f"step {t}")
    direct.close()


def test_agent_that_ends_early_waits_for_its_match(make_multi: Callable) -> None:
    env = make_multi([kaz] * 2, num_workers=1)
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(1)
    actions = rng.integers(0, 6, env.num_envs)
    for _ in range(200):
        obs, rewards, terminated, truncated, infos = env.step(actions)
        done = terminated | truncated
        match_done = done.reshape(2, -1).all(axis=1).repeat(env.num_agents)
        if (done & ~match_done).any():
            break
        actions = rng.integers(0, 6, env.num_envs)
    ended = np.flatnonzero(done & ~match_done)
    assert ended.size, "no agent ended before its match"
    assert infos["active"][ended].all()  # it acted in the step where it ended
    last_obs = obs[ended].copy()
    flags = (terminated[ended].copy(), truncated[ended].copy())
    waited = 0
    for _ in range(3):
        actions = rng.integers(0, 6, env.num_envs)
        obs, rewards, terminated, truncated, infos = env.step(actions)
        if (terminated | truncated).reshape(2, -1).all(axis=1).any():
            break  # a match ended: the waiting stops at its reset
        waited += 1
        np.testing.assert_array_equal(obs[ended], last_obs)
        assert (rewards[ended] == 0).all()
        np.testing.assert_array_equal(terminated[ended], flags[0])
        np.testing.assert_array_equal(truncated[ended], flags[1])
        assert not infos["active"][ended].any()

        # Masking the ended slots alone resets nothing: they stay ended, the match plays on.
        mask = np.zeros(env.num_envs, np.bool_)
        mask[ended] = True
        obs_after, _ = env.reset(options={"reset_mask": mask})
        np.testing.assert_array_equal(obs_after, obs)
    assert waited > 0


def test_reset_mask_resets_whole_matches_only(make_multi: Callable) -> None:
    env = make_multi([rps] * 3, num_workers=2)
    direct = DirectMatches([rps] * 3)
    env.reset(seed=5)
    direct.reset(seed=5)
    actions = np.arange(env.num_envs) % 3
    env.step(actions)
    direct.step(actions)
    mask = np.zeros(env.num_envs, np.bool_)
    mask[2] = True  # one agent of match 1, still playing
    with pytest.raises(ValueError, match="match 1.*a match resets as a whole"):
        env.reset(options={"reset_mask": mask})
    mask[3] = True
    obs, infos = env.reset(seed=[100 + i for i in range(env.num_envs)], options={"reset_mask": mask})
    direct.start(1, 102)  # match 1 takes the seed of its first slot, 2
    np.testing.assert_array_equal(obs, direct.observations())
    assert slot_infos(infos) == {}
    np.testing.assert_array_equal(env.step(actions)[0], direct.step(actions)[0])


def test_disabled_autoreset_resets_matches_when_asked(make_multi: Callable) -> None:
    """Under DISABLED a match starts again only through reset_mask (stepping an ended one is left to the env, as
    gymnasium leaves an ended episode's step to its env)."""
    env = make_multi([functools.partial(rps_v2.parallel_env, max_cycles=2)] * 2, autoreset_mode=AutoresetMode.DISABLED)
    env.reset(seed=0)
    actions = np.zeros(env.num_envs, np.int64)
    env.step(actions)
    _, _, _, truncated, _ = env.step(actions)
    assert truncated.all()
    env.reset(options={"reset_mask": np.ones(env.num_envs, np.bool_)})
    _, _, terminated, truncated, infos = env.step(actions)
    assert not (terminated | truncated).any() and infos["active"].all()


def test_pettingzoo_to_vector_under_sb3(process_guard: Any) -> None:
    venv = SB3VecEnv(pettingzoo_to_vector(kaz, 2, num_workers=2))
    process_guard.watch(descendants())
    try:
        obs = venv.reset()
        assert obs.shape == (8, 27, 5)
        rng = np.random.default_rng(2)
        partial_dones = 0
        for _ in range(120):  # agents die early (SB3VecEnv then resets their slots: a no-op)
            obs, rewards, dones, infos = venv.step(rng.integers(0, 6, 8))
            assert rewards.dtype == np.float32 and len(infos) == 8
            for i in np.flatnonzero(dones):
                assert infos[i]["terminal_observation"].shape == (27, 5)
            per_match = dones.reshape(2, 4)
            partial_dones += int((per_match.any(axis=1) & ~per_match.all(axis=1)).sum())
        assert partial_dones > 0
    finally:
        venv.close()

    venv = SB3VecEnv(pettingzoo_to_vector(rps, 4, num_workers=2))
    try:
        model = PPO("MlpPolicy", venv, n_steps=16, batch_size=64, n_epochs=1, seed=0, device="cpu")
        model.learn(256)
        assert model.num_timesteps >= 256
    finally:
        venv.close()


def test_call_and_attributes_per_slot(make_multi: Callable) -> None:
    env = make_multi([kaz] * 2, num_workers=2)
    env.reset(seed=9)
    states = env.call("state")  # the ParallelEnv's own method, through MatchEnv
    direct = DirectMatches([kaz] * 2)
    direct.reset(seed=9)
    assert len(states) == env.num_envs
    for slot, state in enumerate(states):
        np.testing.assert_array_equal(state, direct.envs[slot // env.num_agents].state())
    assert env.get_attr("possible_agents") == (env.possible_agents,) * env.num_envs
    env.set_attr("match_label", ["a"] * 4 + ["b"] * 4)
    assert env.get_attr("match_label") == ("a",) * 4 + ("b",) * 4
    direct.close()


def test_invalid_actions_name_the_slot(make_multi: Callable) -> None:
    env = make_multi([rps] * 2, num_workers=1)
    env.reset(seed=0)
    actions = np.zeros(env.num_envs, np.int64)
    actions[3] = 7
    with pytest.raises(InvalidActionError, match=r"env\(s\) \[3\]"):
        env.step(actions)
    with pytest.raises(InvalidActionError, match="shape"):
        env.step(np.zeros(env.num_envs + 1, np.int64))


def test_agents_that_are_not_fixed_are_refused(make_multi: Callable) -> None:
    with pytest.raises(EnvError, match="match 0.*declares no possible_agents"):
        make_multi([generated_agents_parallel_v0.parallel_env])
    with pytest.raises(EnvError, match=r"match 1.*action_space Discrete\(3\) but agent 'player_1' has Discrete\(4\)"):
        make_multi([rps, lambda: OtherActionSpace(rps())])
    # Same spaces (one more arrow makes up for one sword less), other agents.
    other_team = functools.partial(kaz, num_archers=3, num_knights=1, max_arrows=11)
    with pytest.raises(ValueError, match="match 1 has agents"):
        make_multi([kaz, other_team], num_workers=1)

    env = make_multi([lambda: Revive(kaz())], num_workers=1)
    env.reset(seed=3)
    rng = np.random.default_rng(1)
    with pytest.raises(EnvError, match="returned observations though they were not in play"):
        for _ in range(200):
            env.step(rng.integers(0, 6, env.num_envs))


def test_close_leaves_no_process_and_no_shared_memory(process_guard: Any) -> None:
    env = pettingzoo_to_vector(kaz, 3, num_workers=2)
    workers = descendants()
    process_guard.watch(workers)
    assert len(workers) >= 2
    env.reset(seed=0)
    env.step(np.zeros(env.num_envs, np.int64))
    # only names these processes use count: tests running beside this one (pytest-xdist) make their own
    used = shm_files_used_by([psutil.Process(), *workers])
    env.close()
    assert wait_gone(workers, timeout=5) == []
    assert used & shm_entries() == set()


def test_a_reset_drops_what_was_sent_and_stepping_goes_on(make_multi: Callable) -> None:
    """A reset while matches step: their results are dropped with the reset (as the matches' own reset drops them),
    and the steps after it return the new episodes, not a stale send's."""
    env = make_multi([rps] * 2, num_workers=1)
    direct = DirectMatches([rps] * 2)
    env.reset(seed=5)
    actions = np.arange(env.num_envs) % 3
    env.send(actions[:2], np.array([0, 1]))  # match 0, not received
    obs, _ = env.reset(seed=5)
    direct.reset(seed=5)
    np.testing.assert_array_equal(obs, direct.observations())
    env.send(actions[2:], np.array([2, 3]))  # match 1 alone: recv returns it, not the dropped send of match 0
    assert env.recv()[4]["env_id"].tolist() == [2, 3]
    env.send(actions[:2], np.array([0, 1]))
    assert env.recv()[4]["env_id"].tolist() == [0, 1]
