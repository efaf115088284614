"""TurnBasedVectorEnv: M turn-based PettingZoo (AEC) matches as one VectorEnv of agent slots, driven by send/recv."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import concatenate, create_empty_array, iterate

from vecfast.multiagent.slot_vector_env import SlotResults, SlotState, SlotVectorEnv
from vecfast.vector.batch_rows import info_rows, write_rows
from vecfast.vector.shared_buffers import map_tree

if TYPE_CHECKING:
    from pettingzoo import AECEnv

__all__ = ["TurnBasedVectorEnv"]


@dataclass(frozen=True)
class Turn:
    """What one agent saw through the AEC ``env.last()`` at one of its turns, and the slot it belongs to."""

    slot: int
    obs: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]

    @property
    def ended(self) -> bool:
        return self.terminated or self.truncated


class Match:
    """One AEC env, driven as PettingZoo's ``agent_iter`` loop drives it, pausing where a live agent must act.

    An agent that has ended (terminated or truncated) gets its turn as in that loop: its final
    ``last()`` is recorded and the match steps it with ``None`` at once, since it has nothing to choose.
    """

    def __init__(self, env: AECEnv, first_slot: int, possible_agents: Sequence[Any]) -> None:
        self.env = env
        self.first_slot = first_slot
        self.agent_index = {agent: a for a, agent in enumerate(possible_agents)}

    @property
    def over(self) -> bool:
        """Every agent has ended and taken its final turn."""
        return not self.env.agents

    def reset(self, seed: int | None, options: dict[str, Any] | None) -> list[Turn]:
        self.env.reset(seed=seed, options=options)
        return self.advance()

    def play(self, action: Any) -> list[Turn]:
        self.env.step(action)
        return self.advance()

    def advance(self) -> list[Turn]:
        """The turns up to the next live agent's (the last one returned), or to the end of the game."""
        turns = []
        while self.env.agents:
            agent = self.env.agent_selection
            obs, reward, terminated, truncated, info = self.env.last()
            turn = Turn(
                self.first_slot + self.agent_index[agent],
                map_tree(np.array, obs),  # a copy: an env may hand out views of its state
                float(reward),
                bool(terminated),
                bool(truncated),
                dict(info),
            )
            turns.append(turn)
            if not turn.ended:
                break
            self.env.step(None)
        return turns


class TurnBasedVectorEnv(SlotVectorEnv):
    """M turn-based PettingZoo AEC matches as one VectorEnv of M x num_agents slots, with EnvPool's send/recv.

    Slots, spaces and infos are laid out as in :class:`~vecfast.multiagent.MultiAgentVectorEnv`:
    slot ``m * num_agents + a`` is agent ``possible_agents[a]`` of match ``m``, ``info["agent_id"]``
    and ``info["match_id"]`` say whose slot is whose. Observations keep the env's space (a Dict with
    its ``"action_mask"`` for PettingZoo's classic games). The matches run in the calling process:
    a board game's step takes microseconds, less than a message to a worker process would.

    Only the agent to move acts, so each slot has its own clock (``AutoresetMode.NEXT_STEP``):

    * :meth:`recv` returns every slot with a turn waiting (``info["env_id"]``, in slot order): the
      agent to move in each match (``info["active"]`` True), and each agent of a match whose game
      has just ended (flags set, ``info["active"]`` False). A slot's turns are exactly what the agent
      sees through the AEC ``env.last()`` at its turns: the reward is its ``_cumulative_rewards``,
      all it got since its previous action, the opponents' moves included (-1 when an opponent wins).
      It raises :class:`~gymnasium.error.NoAsyncCallError` when no slot has a turn waiting (all
      returned slots still owe actions), since nothing could become ready.
    * :meth:`send` takes one action per slot in ``env_ids``; each must be a slot that recv returned
      and that has not acted since (else :class:`~gymnasium.error.AlreadyPendingCallError`). A move
      is played at once, and the match runs to the next agent to move, whose turn recv returns next;
      the action sent after an end is the slot's reset step and is ignored.
    * A game ends when every agent has ended; each of its agents reports that once (an agent that
      ends earlier reports it at its turn, and waits). When every slot of the match has sent its reset
      step, the match resets (unseeded, as gymnasium's autoreset) and the first agent to move gets its
      first observation (reward 0, flags False); the others get theirs when their turn comes. So a slot
      is returned at most once per action it sends (its first turn after :meth:`async_reset` needs
      none), and recv after sending every returned slot always has a turn to return. An agent whose
      game ends before its first turn (an illegal first move) reports the end as its first turn.

    :meth:`async_reset` resets every match: an int seed seeds match ``m`` with ``seed + m``, a list has
    one entry per slot (match ``m`` takes its first slot's). :meth:`reset` and :meth:`step` give the
    VectorEnv contract on top, with a row for every slot: ``step`` sends each slot that owes an action
    its row of ``actions`` (other rows are ignored) and recvs; the returned slots' rows hold their
    turns, every other row its last observation (zeros before its first turn), reward 0 and flags
    False. ``info["active"]`` marks the slots whose row of the next ``step`` is a move.

    Args:
        env_fns: one function per match that creates its PettingZoo AEC env.

    Raises:
        ValueError: the matches' agents differ, or their agents' spaces do.
    """

    def __init__(self, env_fns: Sequence[Callable[[], AECEnv]]) -> None:
        envs: list[AECEnv] = []
        try:
            for fn in env_fns:
                envs.append(fn())
            self.possible_agents: tuple[Any, ...] = tuple(envs[0].possible_agents)
            obs_space, action_space = self._common_spaces(envs)
        except BaseException:
            for env in envs:
                env.close()
            raise
        self._lay_out(len(envs), self.possible_agents, obs_space, action_space, in_turns=True)
        self.matches = [Match(env, m * self.num_agents, self.possible_agents) for m, env in enumerate(envs)]
        self.metadata = {**getattr(envs[0], "metadata", {}), "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = getattr(envs[0], "render_mode", None)
        self._turns: list[Turn | None] = [None] * self.num_envs  # each slot's latest turn
        self._zero_obs = map_tree(lambda a: a[0], create_empty_array(obs_space, 1, np.zeros))  # before a first turn

    def _common_spaces(self, envs: list[AECEnv]) -> tuple[Any, Any]:
        first = envs[0]
        agent = self.possible_agents[0]
        obs_space, action_space = first.observation_space(agent), first.action_space(agent)
        for m, env in enumerate(envs):
            if tuple(env.possible_agents) != self.possible_agents:
                raise ValueError(
                    f"match {m} has agents {list(env.possible_agents)} but match 0 has {list(self.possible_agents)}: "
                    "every match of a turn-based vector env needs the same agents"
                )
            for other in self.possible_agents:
                if env.observation_space(other) != obs_space or env.action_space(other) != action_space:
                    raise ValueError(
                        f"agent {other!r} of match {m} has spaces {env.observation_space(other)}, "
                        f"{env.action_space(other)} but agent {agent!r} of match 0 has {obs_space}, {action_space}: "
                        "one policy acts for every slot, so the agents need the same spaces"
                    )
        return obs_space, action_space

    # ----------------------------------------------------------------- how these matches start, play and report
    def _start(self, matches: np.ndarray, seeds: list[int | None], options: dict[str, Any] | None) -> None:
        """Reset ``matches``: the first agent to move in each has a turn waiting; the others wait for theirs (their
        rows of ``step`` hold zeros until then)."""
        for m, seed in zip(matches.tolist(), seeds, strict=True):
            first = self.matches[m].first_slot
            write_rows(self._last_obs, slice(first, first + self.num_agents), self._zero_obs)
            self._record(self.matches[m].reset(seed, options))

    def _send_slots(self, actions: Any, slots: np.ndarray, whole: bool) -> list[np.ndarray]:
        """Play the moves of ``slots`` at once; a slot that has just ended sends its reset step, and the match starts
        again once all of its slots have."""
        ended_matches = set()
        for slot, action in zip(slots.tolist(), iterate(self._actions_space(len(slots)), actions), strict=True):
            match = self.matches[slot // self.num_agents]
            if self._turns[slot].ended:
                ended_matches.add(slot // self.num_agents)
            else:
                self._record(match.play(action))
        for m in sorted(ended_matches):
            match = self.matches[m]
            first = match.first_slot
            # game over and no slot owing a turn: each agent has reported the end and sent its reset step
            if match.over and (self._state[first : first + self.num_agents] == SlotState.SENT).all():
                self._record(match.reset(None, None))
        return []  # nothing in flight: the next turns are READY

    def _take_ready(self, slots: np.ndarray) -> SlotResults:
        """The turns waiting at ``slots``."""
        turns = [self._turns[i] for i in slots.tolist()]
        infos: dict[str, Any] = {}
        for turn in turns:
            self._add_info(infos, turn.info, turn.slot)
        return SlotResults(
            slots,
            concatenate(
                self.single_observation_space,
                [t.obs for t in turns],
                create_empty_array(self.single_observation_space, len(turns)),
            ),
            np.array([t.reward for t in turns], np.float64),
            np.array([t.terminated for t in turns], np.bool_),
            np.array([t.truncated for t in turns], np.bool_),
            np.array([not t.ended for t in turns], np.bool_),
            info_rows(infos, slots),
        )

    def _call_units(self, name: str, *args: Any, **kwargs: Any) -> Sequence[Any]:
        return [getattr(match.env, name)(*args, **kwargs) for match in self.matches]

    def _get_units(self, name: str) -> Sequence[Any]:
        return [getattr(match.env, name) for match in self.matches]

    def _set_units(self, name: str, values: list[Any] | Any) -> None:
        for m, match in enumerate(self.matches):
            setattr(match.env, name, values[m] if isinstance(values, list) else values)

    def _not_acting_message(self, slots: np.ndarray) -> str:
        reasons = []
        for slot in slots.tolist():
            if self._state[slot] == SlotState.READY:
                reasons.append(f"slot {slot} has a turn that recv() has not returned yet")
            else:
                reasons.append(
                    f"slot {slot} is not to act: it has acted since recv() returned it, or it is not its turn"
                )
        return "; ".join(reasons)

    def _nothing_to_receive_message(self) -> str:
        owing = np.flatnonzero(self._state == SlotState.ACTING).tolist()
        return f"recv() has no turn to return: slots {owing} were returned and owe actions; send() them first"

    def render(self) -> tuple[Any, ...]:
        """One frame per match (its AEC env's ``render()``, as its ``render_mode`` gives them)."""
        return tuple(match.env.render() for match in self.matches)

    def close_extras(self, **kwargs: Any) -> None:
        for match in self.matches:
            match.env.close()

    # ----------------------------------------------------------------- internals
    def _record(self, turns: list[Turn]) -> None:
        for turn in turns:
            self._turns[turn.slot] = turn
            self._state[turn.slot] = SlotState.READY
