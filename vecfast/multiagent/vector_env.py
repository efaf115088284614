"""MultiAgentVectorEnv: many PettingZoo matches as one flat gymnasium VectorEnv of agent slots."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import Space, spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import create_empty_array

from vecfast.multiagent.match_env import MatchEnv
from vecfast.multiagent.slot_vector_env import SlotResults, SlotState, SlotVectorEnv
from vecfast.vector import AsyncSharedMemVectorEnv
from vecfast.vector.batch_rows import info_rows, write_rows
from vecfast.vector.shared_buffers import map_tree

if TYPE_CHECKING:
    from pettingzoo import ParallelEnv

__all__ = ["MultiAgentVectorEnv"]


class MultiAgentVectorEnv(SlotVectorEnv):
    """M PettingZoo matches (ParallelEnvs with fixed agents) as one VectorEnv of M x num_agents slots.

    Slot ``m * num_agents + a`` is agent ``possible_agents[a]`` of match ``m``; every slot
    has the agents' common observation and action space, so one policy acts for all of
    them (``info["agent_id"]`` and ``info["match_id"]`` say whose slot is whose, for a
    trainer that maps slots to policies). The matches run as :class:`MatchEnv` inside an
    :class:`~vecfast.vector.AsyncSharedMemVectorEnv` (``self.matches``): several per
    worker process, all observations, actions, rewards and flags in shared memory.

    Episodes (gymnasium's ``NEXT_STEP`` autoreset, per slot):

    * a match ends when all its agents have ended; its next ``step`` resets it (reward 0,
      flags False, ``info["active"]`` False, actions ignored);
    * an agent that ends before the others reports ``terminated``/``truncated`` on the step
      it ends and repeats that flag, with reward 0, its last observation and
      ``info["active"]`` False, until its match resets; its actions are ignored. A trainer
      that drops the transition after every ``done`` (as ``NEXT_STEP`` requires) thus drops
      every step of an ended agent; episode counters see one extra, empty episode per step
      such a slot waits (mask them with ``info["active"]``);
    * ``reset(options={"reset_mask": mask})`` resets every match whose slots are all in the
      mask; mask entries of agents that have ended in a match still in play are ignored
      (they stay ended), and a mask that selects some but not all still-playing agents of a
      match is an error: a match resets as a whole.

    EnvPool's asynchronous API: :meth:`async_reset`, :meth:`send` (actions for the slots of whole
    matches) and :meth:`recv` (the slots of the earliest send not yet returned, once its matches have
    stepped; ``info["env_id"]`` names them); ``step`` is ``send`` of every slot and ``recv``.

    ``DISABLED`` autoreset works the same way, except that a finished match must be reset
    explicitly. Seeds: an int seeds match ``m`` with ``seed + m``; a list has one entry per
    slot and match ``m`` uses that of its first slot. ``call``/``get_attr`` return one value
    per slot (its match's value; attributes the :class:`MatchEnv` lacks come from the
    ParallelEnv, e.g. ``call("state")``), ``render`` one frame per match. Errors from a
    match (:class:`~vecfast.vector.EnvError`) name it as the env index.

    Args:
        env_fns: one function per match that creates its PettingZoo ParallelEnv.
        copy: gymnasium's argument, accepted; the observations returned are always copies (rows gathered by slot).
        autoreset_mode: ``NEXT_STEP`` (default) or ``DISABLED``.
        num_workers, step_timeout, spin_us, close_timeout, context: as for
            :class:`~vecfast.vector.AsyncSharedMemVectorEnv`, which runs the matches.
        daemon: start workers as daemon processes. Off by default, as a daemon process may
            not start processes of its own and a match may (a Doom match runs one per
            player); workers die with their owner either way.

    Raises:
        vecfast.vector.EnvError: a ParallelEnv cannot be created, declares no
            ``possible_agents`` or gives its agents different spaces (before any step).
        ValueError: the matches do not all have the same agents.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], ParallelEnv]],
        *,
        copy: bool = True,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        num_workers: int | None = None,
        step_timeout: float | None = None,
        spin_us: float = 200.0,
        close_timeout: float = 10.0,
        context: str | None = None,
        daemon: bool = False,
    ) -> None:
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            raise ValueError(
                "MultiAgentVectorEnv supports AutoresetMode.NEXT_STEP and DISABLED; "
                "SB3VecEnv handles NEXT_STEP by resetting finished matches itself"
            )
        self.copy = copy
        self.num_matches = len(env_fns)
        self.matches = AsyncSharedMemVectorEnv(
            [functools.partial(MatchEnv, fn, m) for m, fn in enumerate(env_fns)],
            copy=False,
            autoreset_mode=self.autoreset_mode,
            num_workers=num_workers,
            double_buffered=False,
            step_timeout=step_timeout,
            spin_us=spin_us,
            close_timeout=close_timeout,
            context=context,
            daemon=daemon,
        )
        try:
            self._check_agents()
            agent_obs_space = self.matches.get_attr("agent_observation_space")[0]
            agent_action_space = self.matches.get_attr("agent_action_space")[0]
        except BaseException:
            self.matches.close(terminate=True)
            raise
        self._lay_out(self.num_matches, self.possible_agents, agent_obs_space, agent_action_space)
        self.metadata = dict(self.matches.metadata)
        self.render_mode = self.matches.render_mode
        # the matches' latest observation, filled by every start and recv
        self._match_obs: dict[str, Any] = create_empty_array(self.matches.single_observation_space, self.num_matches)
        self._start_infos: dict[str, Any] = {}  # the last start's agent infos, over every slot

    def _check_agents(self) -> None:
        agent_lists = self.matches.get_attr("possible_agents")
        self.possible_agents: tuple[Any, ...] = agent_lists[0]
        for m, agents in enumerate(agent_lists):
            if agents != self.possible_agents:
                raise ValueError(
                    f"match {m} has agents {list(agents)} but match 0 has {list(self.possible_agents)}: "
                    "every match of a multi-agent vector env needs the same agents"
                )

    # ----------------------------------------------------------------- how these matches start, step and report
    def _start(self, matches: np.ndarray, seeds: list[int | None], options: dict[str, Any] | None) -> None:
        """Reset ``matches`` in their workers (the others' results in flight are dropped: a start follows none)."""
        mask = np.zeros(self.num_matches, np.bool_)
        mask[matches] = True
        every = len(matches) == self.num_matches
        match_seeds = [None] * self.num_matches
        for m, seed in zip(matches.tolist(), seeds, strict=True):
            match_seeds[m] = seed
        match_obs, infos = self.matches.reset(
            seed=match_seeds, options=options if every else {**(options or {}), "reset_mask": mask}
        )
        write_rows(self._match_obs, matches, map_tree(lambda a: a[matches], match_obs))
        self._start_infos = self._agent_infos(infos, np.arange(self.num_matches))
        self._state[np.isin(self.match_ids, matches)] = SlotState.READY

    def _send_slots(self, actions: Any, slots: np.ndarray, whole: bool) -> list[np.ndarray]:
        """Step the matches of ``slots`` (whole matches) in their workers."""
        matches = self.match_ids[slots][:: self.num_agents]
        self.matches.send(self._per_match(self.single_action_space, actions), matches)
        return [slots]

    def _receive(self, slots: np.ndarray) -> SlotResults:
        """The matches of ``slots``, once they have stepped."""
        match_obs, _, _, _, infos = self.matches.recv(self.match_ids[slots][:: self.num_agents])
        returned = np.asarray(infos.pop("env_id"))
        order = np.argsort(returned)
        matches = returned[order]
        write_rows(self._match_obs, returned, match_obs)
        return self._results(matches, info_rows(self._agent_infos(info_rows(infos, order), matches), slots))

    def _take_ready(self, slots: np.ndarray) -> SlotResults:
        """The first observations of the matches the last start reset."""
        infos, self._start_infos = info_rows(self._start_infos, slots), {}
        return self._results(np.unique(self.match_ids[slots]), infos)

    def _call_units(self, name: str, *args: Any, **kwargs: Any) -> Sequence[Any]:
        return self.matches.call(name, *args, **kwargs)

    def _get_units(self, name: str) -> Sequence[Any]:
        return self.matches.get_attr(name)

    def _set_units(self, name: str, values: list[Any] | Any) -> None:
        self.matches.set_attr(name, values)

    def render(self) -> tuple[Any, ...]:
        """One frame per match (the ParallelEnv's ``render()``)."""
        return self.matches.render()

    def close_extras(self, **kwargs: Any) -> None:
        self.matches.close(**kwargs)

    # ----------------------------------------------------------------- internals
    def _results(self, matches: np.ndarray, infos: dict[str, Any]) -> SlotResults:
        """The slots of ``matches`` (ascending) as their latest observations say, with their ``infos``."""
        slots = (matches[:, None] * self.num_agents + np.arange(self.num_agents)).reshape(-1)
        latest = map_tree(lambda a: a[matches], self._match_obs)
        return SlotResults(
            slots,
            map_tree(lambda a: a.reshape(len(slots), *a.shape[2:]), latest["obs"]),  # a copy already
            latest["reward"].reshape(-1).copy(),
            latest["terminated"].reshape(-1).astype(np.bool_),
            latest["truncated"].reshape(-1).astype(np.bool_),
            latest["active"].reshape(-1).astype(np.bool_),
            infos,
        )

    def _per_match(self, space: Space, batch: Any) -> Any:
        """A flat action batch of whole matches' slots as (matches, num_agents, ...) arrays (views where possible)."""
        if isinstance(space, spaces.Dict):
            return {key: self._per_match(sub, batch[key]) for key, sub in space.spaces.items()}
        if isinstance(space, spaces.Tuple):
            return tuple(self._per_match(sub, part) for sub, part in zip(space.spaces, batch, strict=True))
        array = np.asarray(batch)
        return array.reshape(-1, self.num_agents, *array.shape[1:])

    def _agent_infos(self, infos: dict[str, Any], matches: np.ndarray) -> dict[str, Any]:
        """Spread the per-agent infos of ``matches`` (the rows of ``infos``) over their slots, gymnasium style (arrays
        over every slot, plus masks)."""
        flat: dict[str, Any] = {}
        if "agent_infos" in infos:
            rows, mask = infos["agent_infos"], infos["_agent_infos"]
            for r in np.flatnonzero(mask).tolist():
                for a, info in enumerate(rows[r]):
                    if info:
                        self._add_info(flat, info, int(matches[r]) * self.num_agents + a)
        return flat
