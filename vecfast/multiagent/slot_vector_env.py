"""SlotVectorEnv: the base of vecfast's vector envs of agent slots (parallel, turn-based and Doom matches).

M matches of ``num_agents`` agents are one gymnasium VectorEnv of M x num_agents slots, laid out by a
:class:`~vecfast.multiagent.slots.SlotLayout` (slot ``m * num_agents + a`` is agent ``possible_agents[a]`` of match
``m``), which is also how a trainer recognises one (:func:`~vecfast.multiagent.slots.slot_layout_of`). The base holds
what every kind shares: the layout and spaces, which slots have ended, the checks of EnvPool's ``send``/``recv``
(which every kind has, so that APPO samples them double-buffered) and the ids every info carries. The kinds differ in
how their matches run: in worker processes (parallel PettingZoo envs), in this process (turn-based games), or as
networked games per player (Doom).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import Space
from gymnasium.error import ClosedEnvironmentError
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space

from vecfast.multiagent.slots import SlotLayout

__all__ = ["SlotVectorEnv"]


class SlotVectorEnv(VectorEnv):
    """A VectorEnv of agent slots with EnvPool's ``async_reset``/``send``/``recv`` (see the module docstring).

    Subclasses call :meth:`_lay_out` once their agents and spaces are known, and implement the three calls.
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
    ) -> None:
        """Lay out ``num_matches`` matches of ``possible_agents`` whose agents share these spaces."""
        self.slots = SlotLayout(num_matches, possible_agents, in_turns=in_turns)
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
        self._ended = np.zeros(self.num_envs, np.bool_)  # each slot's last reported terminated | truncated
        self._action_spaces: dict[int, Space] = {self.num_envs: self.action_space}  # by rows, for send's checks

    # ----------------------------------------------------------------- EnvPool-style API
    def async_reset(self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> None:
        """Reset every match; :meth:`recv` returns the first observations."""
        raise NotImplementedError

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray) -> None:
        """Act for slots ``env_ids`` with the rows of ``actions``."""
        raise NotImplementedError

    def recv(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The next slots with results (``info["env_id"]`` names them)."""
        raise NotImplementedError

    # ----------------------------------------------------------------- shared checks and infos
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

    def _slot_infos(self, infos: dict[str, Any], slots: np.ndarray, active: np.ndarray) -> dict[str, Any]:
        """Add the rows of ``slots`` (recv's rows) of the ids every info carries, ``active`` and ``env_id``."""
        every = np.ones(len(slots), np.bool_)
        infos["agent_id"], infos["_agent_id"] = self.agent_ids[slots], every
        infos["match_id"], infos["_match_id"] = self.match_ids[slots], every
        infos["active"], infos["_active"] = active, every
        infos["env_id"] = slots
        return infos
