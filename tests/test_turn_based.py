"""TurnBasedVectorEnv: each slot sees exactly what its agent sees through PettingZoo's AEC ``env.last()``."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.vector import AutoresetMode
from pettingzoo.classic import connect_four_v3, tictactoe_v3

from vecfast.multiagent import TurnBasedVectorEnv
from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.sampling.sampler import Sampler

GAMES = {"connect_four": connect_four_v3.env, "tictactoe": tictactoe_v3.env}
MATCHES = 3
SEED = 7


@dataclass(frozen=True)
class View:
    """One turn of one agent: its observation (board and action mask), reward and flags."""

    board: tuple[int, ...]
    mask: tuple[int, ...]
    reward: float
    terminated: bool
    truncated: bool


def view(obs: dict[str, Any], reward: float, terminated: bool, truncated: bool) -> View:
    return View(
        tuple(np.asarray(obs["observation"]).ravel().tolist()),
        tuple(np.asarray(obs["action_mask"]).tolist()),
        float(reward),
        bool(terminated),
        bool(truncated),
    )


def row(obs: dict[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    return {key: value[i] for key, value in obs.items()}


def legal_action(rng: np.random.Generator, mask: np.ndarray) -> int:
    legal = np.flatnonzero(mask)
    return int(rng.choice(legal)) if len(legal) else 0


def play_pettingzoo(make: Callable[[], Any], seed: int, moves: list[int]) -> dict[str, list[View]]:
    """Each agent's turns when ``make()``'s games are played with ``moves`` in order, resetting after each game;
    stops at the first live turn without a move left."""
    env = make()
    env.reset(seed=seed)
    left = deque(moves)
    views: dict[str, list[View]] = {agent: [] for agent in env.possible_agents}
    while True:
        for agent in env.agent_iter():
            obs, reward, terminated, truncated, _ = env.last()
            views[agent].append(view(obs, reward, terminated, truncated))
            if terminated or truncated:
                action = None
            elif not left:
                env.close()
                return views
            else:
                action = left.popleft()
            env.step(action)
        env.reset()


@dataclass
class VectorRun:
    """A run of random legal games through the vector env: each slot's turns and each match's moves in order."""

    views: list[list[View]]
    moves: list[list[int]]
    games: int


def play_vector(env: TurnBasedVectorEnv, games: int, seed: int) -> VectorRun:
    """Random legal moves until ``games`` games have finished, stopping at a recv without an end (so that every
    match waits for a live agent's move, where :func:`play_pettingzoo` stops too). Checks every recv's slots."""
    rng = np.random.default_rng(seed)
    run = VectorRun([[] for _ in range(env.num_envs)], [[] for _ in range(env.num_matches)], 0)
    game_rewards = np.zeros(env.num_matches)
    env.async_reset(seed=seed)
    while True:
        obs, rewards, terminated, truncated, info = env.recv()
        ids = info["env_id"]
        ended = terminated | truncated
        assert np.array_equal(info["active"], ~ended)
        assert np.array_equal(info["match_id"], ids // env.num_agents)
        assert list(info["agent_id"]) == [env.possible_agents[i % env.num_agents] for i in ids.tolist()]
        for m in np.unique(ids // env.num_agents).tolist():
            mine = ids // env.num_agents == m
            match = env.matches[m].env
            if ended[mine].any():  # a game's end: every agent of the match reports it, in the same recv
                assert ended[mine].all() and mine.sum() == env.num_agents and not match.agents
            else:  # otherwise exactly the agent to move
                assert mine.sum() == 1
                assert env.possible_agents[int(ids[mine][0]) % env.num_agents] == match.agent_selection
        for i, slot in enumerate(ids.tolist()):
            run.views[slot].append(view(row(obs, i), rewards[i], terminated[i], truncated[i]))
            game_rewards[slot // env.num_agents] += rewards[i]
        for m in np.unique(ids[ended] // env.num_agents).tolist():
            run.games += 1
            if env.possible_agents == ("player_0", "player_1"):  # connect four: zero-sum
                assert game_rewards[m] == 0
            game_rewards[m] = 0
        if run.games >= games and not ended.any():
            return run
        actions = np.zeros(len(ids), np.int64)
        for i, slot in enumerate(ids.tolist()):
            if info["active"][i]:
                actions[i] = legal_action(rng, obs["action_mask"][i])
                run.moves[slot // env.num_agents].append(int(actions[i]))
        env.send(actions, ids)


@pytest.mark.parametrize("game", sorted(GAMES))
def test_each_slot_sees_what_its_agent_sees_through_aec_last(game: str) -> None:
    make = GAMES[game]
    env = TurnBasedVectorEnv([make] * MATCHES)
    run = play_vector(env, games=8 * MATCHES, seed=SEED)
    env.close()
    assert run.games >= 20
    for m in range(MATCHES):
        reference = play_pettingzoo(make, SEED + m, run.moves[m])
        for a, agent in enumerate(env.possible_agents):
            assert run.views[m * env.num_agents + a] == reference[agent], (m, agent)
        ends = sum(v.terminated or v.truncated for v in reference[env.possible_agents[0]])
        assert ends >= 3  # several resets per match


def test_spaces_ids_and_metadata() -> None:
    env = TurnBasedVectorEnv([connect_four_v3.env] * 2)
    aec = connect_four_v3.env()
    assert env.num_envs == 4 and env.num_matches == 2 and env.num_agents == 2
    assert env.possible_agents == tuple(aec.possible_agents)
    assert isinstance(env.single_observation_space, spaces.Dict)
    assert env.single_observation_space == aec.observation_space("player_0")
    assert env.single_action_space == aec.action_space("player_0")
    assert env.observation_space["action_mask"].shape == (4, 7)
    assert env.action_space.shape == (4,)
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert list(env.agent_ids) == ["player_0", "player_1"] * 2
    assert env.match_ids.tolist() == [0, 0, 1, 1]
    env.close()


def test_matches_with_other_agents_or_spaces_are_refused() -> None:
    with pytest.raises(ValueError, match="agents"):
        TurnBasedVectorEnv([connect_four_v3.env, tictactoe_v3.env])

    def uneven() -> Any:
        env = tictactoe_v3.env()
        default = env.action_space
        env.action_space = lambda agent: spaces.Discrete(3) if agent == "player_2" else default(agent)
        return env

    with pytest.raises(ValueError, match="same spaces"):
        TurnBasedVectorEnv([uneven])


def test_send_to_a_slot_that_is_not_to_act_raises() -> None:
    env = TurnBasedVectorEnv([tictactoe_v3.env] * 2)
    with pytest.raises(AlreadyPendingCallError, match="before any reset"):
        env.send(np.array([0]), [0])
    with pytest.raises(NoAsyncCallError, match="before any reset"):
        env.recv()
    env.async_reset(seed=0)
    with pytest.raises(AlreadyPendingCallError, match="not returned yet"):
        env.send(np.array([0]), [0])  # its turn is there, but recv has not returned it
    _, _, _, _, info = env.recv()
    assert info["env_id"].tolist() == [0, 2]  # the first agent to move of each match
    with pytest.raises(AlreadyPendingCallError, match="not to act"):
        env.send(np.array([0, 0]), [0, 1])  # slot 1 waits for its turn; nothing was played
    env.send(np.array([4]), [0])
    with pytest.raises(AlreadyPendingCallError, match="not to act"):
        env.send(np.array([3]), [0])  # it acted already
    with pytest.raises(ValueError, match="distinct"):
        env.send(np.array([1, 1]), [2, 2])
    _, _, _, _, info = env.recv()
    assert info["env_id"].tolist() == [1]  # match 1 still waits for slot 2
    with pytest.raises(NoAsyncCallError, match=r"slots \[1, 2\]"):
        env.recv()  # both returned slots owe actions: nothing can become ready
    env.close()


def test_after_an_end_the_next_step_resets_with_reward_zero() -> None:
    env = TurnBasedVectorEnv([tictactoe_v3.env])
    env.async_reset(seed=0)
    # player_1 takes the left column (cells 0, 1, 2), player_2 plays 3 and 4
    for slot, cell in [(0, 0), (1, 3), (0, 1), (1, 4), (0, 2)]:
        _, _, _, _, info = env.recv()
        assert info["env_id"].tolist() == [slot]
        env.send(np.array([cell]), [slot])
    obs, rewards, terminated, truncated, info = env.recv()
    assert info["env_id"].tolist() == [0, 1] and terminated.all() and not info["active"].any()
    assert rewards.tolist() == [1.0, -1.0]  # player_2's -1 came with player_1's move
    env.send(np.array([5]), [1])  # the loser's reset step: player_1 has not sent its own
    with pytest.raises(NoAsyncCallError, match=r"slots \[0\]"):
        env.recv()
    env.send(np.array([5]), [0])  # now the match resets
    obs, rewards, terminated, truncated, info = env.recv()
    assert info["env_id"].tolist() == [0] and info["active"].tolist() == [True]
    assert rewards.tolist() == [0.0] and not terminated.any() and not truncated.any()
    assert not obs["observation"].any() and obs["action_mask"].all()  # an empty board
    env.send(np.array([8]), [0])
    obs, rewards, terminated, truncated, info = env.recv()
    assert info["env_id"].tolist() == [1]  # player_2's first turn of the new game
    assert rewards.tolist() == [0.0] and not terminated.any() and obs["observation"][0].sum() == 1
    env.close()


def test_reset_and_step_give_a_row_per_slot() -> None:
    env = TurnBasedVectorEnv([connect_four_v3.env] * 2)
    obs, info = env.reset(seed=1)
    assert obs["observation"].shape == (4, 6, 7, 2)
    assert info["active"].tolist() == [True, False, True, False]
    obs, rewards, terminated, truncated, info = env.step(np.array([3, 0, 4, 0]))
    assert info["active"].tolist() == [False, True, False, True]
    assert rewards.tolist() == [0.0] * 4 and not terminated.any() and not truncated.any()
    assert obs["observation"][1].sum() == 1  # player_1 sees player_0's piece
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(200):
        moving = info["active"]
        actions = np.array([legal_action(rng, mask) if moving[i] else 0 for i, mask in enumerate(obs["action_mask"])])
        obs, rewards, terminated, truncated, info = env.step(actions)
        done = terminated | truncated
        ended += done.sum()
        assert not (info["active"] & done).any()
        assert info["active"].sum() + done.sum() >= env.num_matches
    assert ended >= 4
    env.close()


def test_a_reset_mask_restarts_only_the_matches_it_selects() -> None:
    """The slot env base owns reset's mask for every kind; the turn-based matches had none (a ValueError from AEC)."""
    env = TurnBasedVectorEnv([connect_four_v3.env] * 2)
    env.reset(seed=1)
    obs, _, _, _, info = env.step(np.array([3, 0, 4, 0]))  # player_0 of each match has moved
    assert obs["observation"][1].sum() == 1 and obs["observation"][3].sum() == 1
    obs, info = env.reset(options={"reset_mask": np.array([False, False, True, True])})
    assert obs["observation"][3].sum() == 0 and obs["observation"][1].sum() == 1  # match 1 is new, match 0 plays on
    assert info["active"].tolist() == [False, False, True, False]  # match 1's first mover; match 0 awaits its own
    obs, _, _, _, info = env.step(np.array([0, 5, 2, 0]))  # player_1 of match 0 and player_0 of match 1 move
    assert info["active"].tolist() == [True, False, False, True]
    with pytest.raises(ValueError, match="a match resets as a whole"):
        env.reset(options={"reset_mask": np.array([True, False, False, False])})
    env.close()


def test_control_calls_reach_each_slots_match() -> None:
    env = TurnBasedVectorEnv([tictactoe_v3.env] * 2)
    assert env.get_attr("possible_agents") == (["player_1", "player_2"],) * 4
    env.set_attr("label", ["a", "ignored", "b", "ignored"])  # one value per slot: a match takes its first slot's
    assert env.get_attr("label") == ("a", "a", "b", "b")
    env.set_attr("label", "c")
    assert env.get_attr("label") == ("c",) * 4
    assert env.call("action_space", "player_2") == (spaces.Discrete(9),) * 4
    with pytest.raises(ValueError, match="one value per slot"):
        env.set_attr("label", ["a", "b"])
    assert env.slots.in_turns and not env.slots.reward_shaping
    env.close()


def test_close_closes_the_matches() -> None:
    closed: list[int] = []

    def make() -> Any:
        env = tictactoe_v3.env()
        close = env.close
        env.close = lambda: (closed.append(1), close())
        return env

    env = TurnBasedVectorEnv([make] * 3)
    env.async_reset(seed=0)
    env.close()
    assert env.closed and len(closed) == 3
    with pytest.raises(ClosedEnvironmentError):
        env.recv()
    with pytest.raises(ClosedEnvironmentError):
        env.send(np.array([0]), [0])
    env.close()  # a second close does nothing
    assert len(closed) == 3


class RecordingEnv:
    """The sampler's view of a TurnBasedVectorEnv, logging each match's moves (an ended slot's reset step is none)."""

    def __init__(self, env: TurnBasedVectorEnv) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self.moves: list[list[int]] = [[] for _ in range(env.num_matches)]
        self.active = np.zeros(env.num_envs, np.bool_)

    def async_reset(self, seed: int | None = None) -> None:
        self.env.async_reset(seed=seed)

    def recv(self) -> tuple[Any, ...]:
        obs, rewards, terminated, truncated, info = self.env.recv()
        self.active[info["env_id"]] = info["active"]
        return obs, rewards, terminated, truncated, info

    def send(self, actions: np.ndarray, env_ids: np.ndarray) -> None:
        for action, slot in zip(actions.tolist(), env_ids.tolist(), strict=True):
            if self.active[slot]:
                self.moves[slot // self.env.num_agents].append(action)
        self.env.send(actions, env_ids)


def test_the_sampler_drives_it_and_stores_the_agents_rewards() -> None:
    env = TurnBasedVectorEnv([connect_four_v3.env] * 2)
    recording = RecordingEnv(env)
    cfg = TrainConfig.from_overrides(use_rnn=False, encoder_mlp_layers=(16,))
    torch.manual_seed(0)
    model = ActorCritic(env.single_observation_space, env.single_action_space, cfg)
    rollout, steps = 8, 300
    sampler = Sampler(recording, model, rollout, num_rows=steps * env.num_envs // rollout + env.num_envs, seed=SEED)
    held: list[set[int]] = [set() for _ in range(env.num_envs)]  # the storage rows each env filled
    received = sampler.reset()
    for _ in range(steps):
        sampler.step(received)
        for e, s in enumerate(sampler.row.tolist()):
            held[e].add(s)
        received = sampler.observe()
    for m in range(env.num_matches):
        reference = play_pettingzoo(connect_four_v3.env, SEED + m, recording.moves[m])
        for a, agent in enumerate(env.possible_agents):
            slot = m * env.num_agents + a
            stored = sum(sampler.storage.rewards[s].sum().item() for s in held[slot] if s >= 0)
            expected = sum(v.reward for v in reference[agent])
            assert stored == pytest.approx(expected), (m, agent)
    assert sampler.episodes.summary().episodes >= 4
    env.close()
