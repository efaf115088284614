"""Agent slots: how a vector env lays out the agents of M matches as M x num_agents flat slots."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vecfast.vector.action_check import check_reset_mask


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def slot_layout_of(env: Any) -> SlotLayout | None:
    """The layout a vector env of matches declares as its ``slots`` (through wrappers), or None for a vector env of
    single-agent envs: how a trainer tells the two apart (and a match of at least two agents from one agent)."""
    layout = getattr(getattr(env, "unwrapped", env), "slots", None)
    return layout if isinstance(layout, SlotLayout) else None


class SlotLayout:
    """Slot ``m * num_agents + a`` holds agent ``possible_agents[a]`` of match ``m``.

    Holds the per-slot ``agent_id``/``match_id`` arrays every info carries, and the rules
    that map per-slot seeds and reset masks onto whole matches. It also declares what the env can
    do, so that a trainer asks the layout rather than the env's class: ``in_turns``, the agents of a
    match act in turns, so ``recv`` returns only the slots whose turn it is (a board game), else
    every slot acts at every step (parallel matches); ``reward_shaping``, each slot's env takes its
    own reward shaping coefficients through ``set_attr("reward_shaping", per_slot)`` (Doom matches).
    """

    def __init__(
        self, num_matches: int, possible_agents: Sequence[Any], *, in_turns: bool = False, reward_shaping: bool = False
    ) -> None:
        self.in_turns = in_turns
        self.reward_shaping = reward_shaping
        self.num_matches = num_matches
        self.possible_agents = tuple(possible_agents)
        self.num_agents = len(self.possible_agents)
        self.num_slots = num_matches * self.num_agents
        self.agent_ids = _read_only(np.asarray(list(self.possible_agents) * num_matches))
        self.match_ids = _read_only(np.repeat(np.arange(num_matches), self.num_agents))
        self.all_slots = _read_only(np.ones(self.num_slots, np.bool_))

    def seat(self, slot: int) -> tuple[int, int]:
        """The match of ``slot`` and the index of its agent in ``possible_agents``."""
        return int(self.match_ids[slot]), slot - int(self.match_ids[slot]) * self.num_agents

    def add_ids(self, infos: dict[str, Any], slots: np.ndarray | None = None) -> dict[str, Any]:
        """Add ``agent_id`` and ``match_id`` (with their all-True masks) of ``slots`` (None: every slot, in order)
        to a vector info dict whose rows are those slots."""
        if slots is None:
            agent_ids, match_ids, every = self.agent_ids, self.match_ids, self.all_slots
        else:
            agent_ids, match_ids, every = self.agent_ids[slots], self.match_ids[slots], np.ones(len(slots), np.bool_)
        infos["agent_id"], infos["_agent_id"] = agent_ids, every
        infos["match_id"], infos["_match_id"] = match_ids, every
        return infos

    def match_seeds(self, seed: int | Sequence[int | None] | None) -> int | list[int | None] | None:
        """An int stays (match ``m`` gets ``seed + m``); a per-slot list gives each match its first slot's seed."""
        if seed is None or isinstance(seed, (int, np.integer)):
            return seed
        if len(seed) != self.num_slots:
            raise ValueError(
                f"If seeds are passed as a list the length must match num_envs={self.num_slots} "
                f"but got length={len(seed)}."
            )
        return list(seed[:: self.num_agents])

    def matches_to_reset(self, mask: Any, ended: np.ndarray) -> np.ndarray:
        """The matches a slot ``reset_mask`` resets: those it selects whole.

        Slots of agents that have ended (``ended``) in a match still in play may be
        selected alone (they stay ended); selecting some but not all still-playing agents
        of a match is an error, since a match resets as a whole.
        """
        check_reset_mask(mask, self.num_slots)
        per_match = mask.reshape(self.num_matches, self.num_agents)
        whole = per_match.all(axis=1)
        playing = per_match & ~ended.reshape(self.num_matches, self.num_agents)
        cut = np.flatnonzero(playing.any(axis=1) & ~whole)
        if cut.size:
            m = int(cut[0])
            first = m * self.num_agents
            raise ValueError(
                f"reset_mask selects agent slots {(first + np.flatnonzero(playing[m])).tolist()} of match {m}, "
                f"whose agents are still playing, but not all of its slots {first}-{first + self.num_agents - 1}: "
                "a match resets as a whole"
            )
        return whole
