"""SlotVectorEnv: the base of vecfast's vector envs of agent slots (parallel, turn-based and Doom matches).

M matches of ``num_agents`` agents are one gymnasium VectorEnv of M x num_agents slots, laid out by a
:class:`~vecfast.multiagent.slots.SlotLayout` (slot ``m * num_agents + a`` is agent ``possible_agents[a]`` of match
``m``), which is also how a trainer recognises one (:func:`~vecfast.multiagent.slots.slot_layout_of`) and what it can
do (turn-taking, reward shaping per slot).

The base owns the protocol, as EnvPool defines it and gymnasium's VectorEnv wraps it: ``reset``, ``async_reset``,
``send``/``recv`` with their checks, ``step`` as ``send`` of every slot that owes an action and ``recv``, per-slot
``call``/``get_attr``/``set_attr``, and one :class:`SlotState` per slot with one queue of the slots in flight. A kind
of match implements only how its matches start (:meth:`~SlotVectorEnv._start`), take actions
(:meth:`~SlotVectorEnv._send_slots`) and give results (:meth:`~SlotVectorEnv._receive` for slots in flight,
:meth:`~SlotVectorEnv._take_ready` for results it holds): in worker processes (parallel PettingZoo envs), in this
process (turn-based games), or as networked games per player (Doom).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import Space
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space, create_empty_array

from vecfast.multiagent.slots import SlotLayout
from vecfast.vector.action_check import check_action_batch
from vecfast.vector.batch_rows import scatter_info_rows, write_rows
from vecfast.vector.shared_buffers import map_tree

__all__ = ["SlotResults", "SlotState", "SlotVectorEnv"]


class SlotState(enum.IntEnum):
    """Where an agent slot is in its send/recv cycle."""

    ACTING = 0  # reset or recv returned it: it owes an action
    SENT = 1  # its action is in (or its match is starting): nothing to return until it has stepped or its turn comes
    READY = 2  # its match's kind holds a result for it: recv returns it without waiting


@dataclass
class SlotResults:
    """What a kind of match gives back for ``slots`` (ascending): their rows of a recv, infos by row (gymnasium's
    arrays with ``_key`` masks), ``active`` marking the rows that are an agent's move."""

    slots: np.ndarray
    obs: Any
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    active: np.ndarray
    infos: dict[str, Any]


class SlotVectorEnv(VectorEnv):
    """A VectorEnv of agent slots with EnvPool's ``async_reset``/``send``/``recv`` (see the module docstring).

    A subclass calls :meth:`_lay_out` once its agents and spaces are known and implements ``_start``, ``_send_slots``,
    ``_receive``, ``_take_ready`` and the per-unit ``_call_units``/``_get_units``/``_set_units`` (a unit is what holds
    a slot's env: its match, or its player's game).
    """

    slots: SlotLayout

    def _lay_out(
        self,
        num_matches: int,
        possible_agents: Sequence[Any],
        observation_space: Space,
        action_space: Space,
        *,
        in_turns: bool = False,
        reward_shaping: bool = False,
        unit_of_slot: np.ndarray | None = None,
    ) -> None:
        """Lay out ``num_matches`` matches of ``possible_agents`` whose agents share these spaces; ``unit_of_slot``:
        the unit holding each slot's env (default: its match)."""
        self.slots = SlotLayout(num_matches, possible_agents, in_turns=in_turns, reward_shaping=reward_shaping)
        self.num_matches = num_matches
        self.possible_agents = self.slots.possible_agents
        self.num_agents = self.slots.num_agents
        self.num_envs = self.slots.num_slots
        self.agent_ids = self.slots.agent_ids
        self.match_ids = self.slots.match_ids
        self.single_observation_space = observation_space
        self.single_action_space = action_space
        self.observation_space = batch_space(observation_space, self.num_envs)
        self.action_space = batch_space(action_space, self.num_envs)
        self._slot_ids = np.arange(self.num_envs)
        self._unit_of_slot = self.match_ids if unit_of_slot is None else np.asarray(unit_of_slot)
        self._first_slot_of_unit = np.unique(self._unit_of_slot, return_index=True)[1]
        self._state = np.full(self.num_envs, SlotState.SENT, np.int8)
        self._sent: deque[np.ndarray] = deque()  # the slots of each send still stepping, oldest first
        self._ended = np.zeros(self.num_envs, np.bool_)  # each slot's last reported terminated | truncated
        self._last_obs = create_empty_array(observation_space, self.num_envs, np.zeros)  # each slot's latest
        self._action_spaces: dict[int, Space] = {self.num_envs: self.action_space}  # by rows, for send's checks
        self._was_reset = False

    # ----------------------------------------------------------------- what a kind of match implements
    def _start(self, matches: np.ndarray, seeds: list[int | None], options: dict[str, Any] | None) -> None:
        """(Re)start the matches ``matches`` (match indices; ``seeds`` one per match): their slots are SENT on entry;
        leave READY those with a first result (which :meth:`_take_ready` gives), and the others SENT."""
        raise NotImplementedError

    def _send_slots(self, actions: Any, slots: np.ndarray, whole: bool) -> list[np.ndarray]:
        """Start acting for ``slots`` (ascending, owing actions, now SENT) with the rows of ``actions``; return the
        parts in flight, in the order :meth:`_receive` takes them (``whole``: one part, as ``step`` wants). A kind may
        mark slots READY instead (a result it holds, or the next turn of a game played here)."""
        raise NotImplementedError

    def _receive(self, slots: np.ndarray) -> SlotResults:
        """Wait for the part ``slots`` in flight; the results of the slots it returns (those, or on a failure the ones
        it holds instead, having emptied the queue)."""
        raise NotImplementedError

    def _take_ready(self, slots: np.ndarray) -> SlotResults:
        """The results this kind holds for the READY ``slots``."""
        raise NotImplementedError

    def _call_units(self, name: str, *args: Any, **kwargs: Any) -> Sequence[Any]:
        raise NotImplementedError

    def _get_units(self, name: str) -> Sequence[Any]:
        raise NotImplementedError

    def _set_units(self, name: str, values: list[Any] | Any) -> None:
        raise NotImplementedError

    def _not_acting_message(self, slots: np.ndarray) -> str:
        """Why ``send`` refuses ``slots``, which do not owe an action."""
        return f"slots {slots.tolist()} were sent and not yet returned by recv()"

    def _nothing_to_receive_message(self) -> str:
        return "recv() with no slot sent: send() actions first"

    # ----------------------------------------------------------------- gymnasium API
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every match, or the whole matches ``options["reset_mask"]`` selects (mask entries of agents that have
        ended in a match still in play may be left out or in; while slots are in flight, every match resets); a row
        per slot."""
        self._check_open()
        mask = options.pop("reset_mask", None) if options else None  # popped, as SyncVectorEnv does
        # slots in flight, or results held for parallel matches: a step is under way, so every match starts again
        settled = not self._sent and (self.slots.in_turns or not (self._state == SlotState.READY).any())
        if mask is None or not settled:
            matches = np.arange(self.num_matches)
        elif not self._was_reset:
            raise RuntimeError("call reset() without a reset_mask before resetting matches selectively")
        else:
            matches = np.flatnonzero(self.slots.matches_to_reset(mask, self._ended))
        if len(matches):
            self._restart(matches, seed, options)
            obs, _, _, _, infos = self._every_slot(self.recv())
        else:
            obs, infos = map_tree(np.copy, self._last_obs), self._every_slot_infos({}, np.zeros(0, np.intp))
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Send every slot that owes an action its row of ``actions`` (other rows are ignored), then recv; a row per
        slot: those recv did not return hold their latest observation, reward 0 and flags False."""
        self._check_open()
        acting = np.flatnonzero(self._state == SlotState.ACTING)
        if len(acting):
            rows = actions if len(acting) == self.num_envs else map_tree(lambda a: np.asarray(a)[acting], actions)
            self._send(rows, acting, whole=True)
        return self._every_slot(self.recv())

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call ``name`` on every unit (match, or player); each slot gets its unit's result."""
        return self._per_slot(self._call_units(name, *args, **kwargs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every slot's unit (match, or player)."""
        return self._per_slot(self._get_units(name))

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set ``name`` on every unit: one value for all, or one per slot (a unit of several slots takes its first
        slot's)."""
        if isinstance(values, (list, tuple)):
            if len(values) != self.num_envs:
                raise ValueError(f"set_attr needs one value per slot ({self.num_envs}), got {len(values)}")
            values = [values[s] for s in self._first_slot_of_unit.tolist()]
        self._set_units(name, values)

    # ----------------------------------------------------------------- EnvPool-style API
    def async_reset(self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> None:
        """Reset every match; :meth:`recv` returns the slots with a first observation."""
        self._check_open()
        self._restart(np.arange(self.num_matches), seed, options)

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray) -> None:
        """Act for slots ``env_ids`` (each must owe an action) with the rows of ``actions``; in parallel matches, the
        slots of whole matches."""
        self._check_open()
        self._send(actions, self._checked_slots(env_ids), whole=False)

    def recv(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Results the matches hold first (in slot order), else the slots of the earliest send not yet returned once
        they have stepped; ``info["env_id"]`` names them."""
        self._check_open()
        ready = np.flatnonzero(self._state == SlotState.READY)
        if len(ready):
            results = self._take_ready(ready)
        elif self._sent:
            part = self._sent[0]
            results = self._receive(part)
            if self._sent and self._sent[0] is part:  # popped once received: an interrupted recv waits again
                self._sent.popleft()
        elif not self._was_reset:
            raise NoAsyncCallError("recv() before any reset: call async_reset() or reset() first", "recv")
        else:
            raise NoAsyncCallError(self._nothing_to_receive_message(), "recv")
        slots = results.slots
        self._state[slots] = SlotState.ACTING
        self._ended[slots] = results.terminated | results.truncated
        write_rows(self._last_obs, slots, results.obs)
        infos = self.slots.add_ids(results.infos, slots)
        infos["active"], infos["_active"] = results.active, infos["_agent_id"]
        infos["env_id"] = slots
        return results.obs, results.rewards, results.terminated, results.truncated, infos

    # ----------------------------------------------------------------- shared rules
    def _restart(
        self, matches: np.ndarray, seed: int | list[int | None] | None, options: dict[str, Any] | None
    ) -> None:
        """Start ``matches`` (every match, or a reset mask's while no slot is in flight)."""
        seeds = self.slots.match_seeds(seed)
        if isinstance(seeds, list):
            per_match = [seeds[m] for m in matches.tolist()]
        else:
            per_match = [None if seeds is None else int(seeds) + m for m in matches.tolist()]
        self._sent.clear()  # a start finishes and drops what was sent (a masked one follows nothing in flight)
        starting = np.isin(self.match_ids, matches)
        self._state[starting] = SlotState.SENT
        self._ended[starting] = False
        self._start(matches, per_match, options)
        self._was_reset = True

    def _send(self, actions: Any, slots: np.ndarray, whole: bool) -> None:
        if not self._was_reset:
            raise AlreadyPendingCallError(
                f"send() to slots {slots.tolist()} before any reset: call async_reset() or reset() first", "send"
            )
        not_acting = slots[self._state[slots] != SlotState.ACTING]
        if len(not_acting):
            raise AlreadyPendingCallError(self._not_acting_message(not_acting), "send")
        if not self.slots.in_turns:
            self._check_whole_matches(slots, "send")
        check_action_batch(self._actions_space(len(slots)), actions, slots)
        order = np.argsort(slots, kind="stable")
        if (order != np.arange(len(slots))).any():
            slots, actions = slots[order], map_tree(lambda a: np.asarray(a)[order], actions)
        self._state[slots] = SlotState.SENT
        self._sent.extend(part for part in self._send_slots(actions, slots, whole) if len(part))

    def _every_slot(
        self, results: tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """recv's rows spread over a row per slot; the rows of slots it did not return are quiet."""
        obs, rewards, terminated, truncated, infos = results
        ids = infos.pop("env_id")
        if len(ids) == self.num_envs:  # every slot, in order
            return obs, rewards, terminated, truncated, infos
        full_rewards = np.zeros(self.num_envs, rewards.dtype)
        full_terminated = np.zeros(self.num_envs, np.bool_)
        full_truncated = np.zeros(self.num_envs, np.bool_)
        full_rewards[ids], full_terminated[ids], full_truncated[ids] = rewards, terminated, truncated
        return (
            map_tree(np.copy, self._last_obs),
            full_rewards,
            full_terminated,
            full_truncated,
            self._every_slot_infos(infos, ids),
        )

    def _every_slot_infos(self, infos: dict[str, Any], ids: np.ndarray) -> dict[str, Any]:
        full = scatter_info_rows(infos, ids, self.num_envs)
        full["active"] = full.get("active", np.zeros(self.num_envs, np.bool_))
        full["_active"] = self.slots.all_slots
        return self.slots.add_ids(full)

    def _per_slot(self, per_unit: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(per_unit[u] for u in self._unit_of_slot.tolist())

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError(f"the {type(self).__name__} is closed")

    def _checked_slots(self, env_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """``env_ids`` as an array of distinct slot indices (a ValueError otherwise)."""
        ids = np.asarray(env_ids)
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or len(ids) == 0:
            raise ValueError(f"env_ids must be a non-empty 1-D integer array, got {env_ids!r}")
        if ids.min() < 0 or ids.max() >= self.num_envs or len(np.unique(ids)) != len(ids):
            raise ValueError(f"env_ids must be distinct slot indices in [0, {self.num_envs}), got {ids.tolist()}")
        return ids

    def _actions_space(self, rows: int) -> Space:
        """The action space of a batch of ``rows`` slots (built once per size: ``send`` checks every batch)."""
        space = self._action_spaces.get(rows)
        if space is None:
            space = self._action_spaces[rows] = batch_space(self.single_action_space, rows)
        return space

    def _check_whole_matches(self, slots: np.ndarray, call: str) -> None:
        """Matches whose agents act at once step as a whole: ``slots`` must hold every slot of their matches."""
        per_match = np.bincount(self.match_ids[slots], minlength=self.num_matches)
        cut = np.flatnonzero((per_match != 0) & (per_match != self.num_agents))
        if cut.size:
            raise ValueError(
                f"{call}() got slots {sorted(slots.tolist())}, which cut match {int(cut[0])}: its agents act at "
                "once, so whole matches (all their slots) step together"
            )
