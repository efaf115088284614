"""Samplers on the nodes of a Ray cluster as one vector env with EnvPool's ``send``/``recv``: SEED RL's central
inference, where each node only steps envs and the learner's process acts for all of them.

Each :class:`~vecfast.cluster.env_sampler.EnvSampler` owns a contiguous block of the env indices. Its envs are
kept in two halves: while the node steps one half, the learner's process acts for the other (``recv`` returns
whichever half a node finished first, across all nodes), so the network's delay overlaps the inference as the
envs' stepping does. One call per half carries the actions there and the results back.

A sampler whose process or node dies is restarted by Ray (``max_restarts``); its envs are then new. What the
caller sees is what vecfast's own vector env shows for a worker it replaced (:mod:`vecfast.vector.restarts`):
each of those envs ends its episode truncated with the last observation it returned and ``info["restarted"]``,
then starts a new one as the autoreset mode says, and :attr:`RemoteVectorEnv.restarts` records the loss. The
other samplers' envs go on untouched.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import create_empty_array

from vecfast.cluster.env_sampler import EnvSampler
from vecfast.cluster.sampler_group import POLL_SECONDS, SamplersVectorEnv
from vecfast.vector.batch_rows import take_rows, write_rows
from vecfast.vector.restarts import RESTARTED, Restart
from vecfast.wrappers.base import StepResult


class _Stage(enum.Enum):
    """Where an env stands after its sampler was lost."""

    LIVE = "live"  # stepped by its sampler
    LOST = "lost"  # its episode was lost: the next send reports it truncated
    RESET_OWED = "reset owed"  # (NEXT_STEP) the next send returns the new env's first observation


class _Reply(enum.Enum):
    """What a call in flight to a sampler returns."""

    STEP = "step"  # some of its envs' step results
    RESET = "reset"  # every env's first observations, after async_reset
    RESTART = "restart"  # every env's first observations, once Ray has restarted the sampler after it died


@dataclass(frozen=True)
class _Call:
    sampler: int
    reply: _Reply
    died_of: BaseException | None = None  # (RESTART) what the sampler died of
    since: float = 0.0  # (RESTART) when it died (time.monotonic())


class RemoteVectorEnv(SamplersVectorEnv):
    """Samplers that step envs for the learner's process (see :class:`~vecfast.cluster.sampler_group.SamplersVectorEnv`
    for the constructor).

    ``async_reset``/``send``/``recv`` as vecfast's AsyncSharedMemVectorEnv has them (``recv`` returns one half of
    one sampler's envs, ``info["env_id"]`` naming them); ``reset`` and ``step`` act on every env at once.
    """

    sampler_class = EnvSampler

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.actors, self.offsets = self.group.actors, self.group.offsets
        self.autoreset_mode = AutoresetMode(self.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
        if self.autoreset_mode == AutoresetMode.DISABLED:
            self.close()
            raise ValueError("RemoteVectorEnv steps envs that reset themselves (NEXT_STEP or SAME_STEP autoreset)")
        self._in_flight: dict[Any, _Call] = {}
        self._ready: deque[StepResult] = deque()  # results that need no call: a lost sampler's envs
        self._out = np.zeros(self.num_envs, dtype=bool)  # sent (or reset) and not yet returned by recv
        self._stage = np.array([_Stage.LIVE] * self.num_envs, dtype=object)
        self._last_obs = create_empty_array(self.single_observation_space, self.num_envs)
        self._new_episode: dict[int, StepResult] = {}  # a restarted sampler's reset, for its envs' RESET_OWED
        self._deferred: dict[int, list[tuple[_Stage, np.ndarray]]] = {}  # sends that wait for that reset

    # ------------------------------------------------------------------ EnvPool's API
    def async_reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Reset every env (env ``i`` with ``seed + i``); ``recv`` returns them half a sampler at a time."""
        if options:
            raise ValueError(f"RemoteVectorEnv resets every env, without options; got {options!r}")
        self._in_flight.clear()
        self._ready.clear()
        self._new_episode.clear()
        self._deferred.clear()
        self._stage[:] = _Stage.LIVE
        for i, actor in enumerate(self.actors):
            self._in_flight[actor.reset.remote(None if seed is None else seed + int(self.offsets[i]))] = _Call(
                i, _Reply.RESET
            )
        self._out[:] = True

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray) -> None:
        """Step envs ``env_ids`` (returned by ``recv`` since they were last sent) with the rows of ``actions``."""
        ids = np.asarray(env_ids)
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or len(ids) == 0:
            raise ValueError(f"env_ids must be a non-empty 1-D integer array, got {env_ids!r}")
        if ids.min() < 0 or ids.max() >= self.num_envs or len(np.unique(ids)) != len(ids):
            raise ValueError(f"env_ids must be distinct env indices in [0, {self.num_envs}), got {ids.tolist()}")
        if self._out[ids].any():
            raise RuntimeError(f"envs {ids[self._out[ids]].tolist()} were sent and not yet returned by recv()")
        samplers = np.searchsorted(self.offsets, ids, side="right") - 1
        for i in np.unique(samplers).tolist():
            rows = np.flatnonzero(samplers == i)
            for stage in (_Stage.LIVE, _Stage.LOST, _Stage.RESET_OWED):
                chosen = rows[self._stage[ids[rows]] == stage]
                if len(chosen):
                    self._send(i, stage, ids[chosen], take_rows(actions, chosen))
        self._out[ids] = True

    def _send(self, i: int, stage: _Stage, ids: np.ndarray, actions: Any) -> None:
        if stage == _Stage.LIVE:
            self._in_flight[self.actors[i].step.remote(actions, ids - self.offsets[i])] = _Call(i, _Reply.STEP)
        else:
            self._after_restart(i, stage, ids)

    def recv(self) -> StepResult:
        """The results of the first envs to be done: half of one sampler's envs (all of a lost sampler's)."""
        while not self._ready:
            if not self._in_flight:
                raise RuntimeError("recv() with no envs sent: send() or async_reset() first")
            done, _ = self.ray.wait(list(self._in_flight), num_returns=1, timeout=POLL_SECONDS)
            if not done:
                continue
            call = self._in_flight.pop(done[0])
            if call.reply == _Reply.RESTART:
                self._restarted(done[0], call)
                continue
            try:
                result = self.ray.get(done[0])
            except self.ray.exceptions.RayActorError as error:
                self._restart(call.sampler, error)
                continue
            self._received(call.sampler, result, call.reply == _Reply.RESET)
        result = self._ready.popleft()
        self._out[result[4]["env_id"]] = False
        return result

    def _received(self, i: int, result: StepResult, reset: bool) -> None:
        """A sampler's reply, with global env ids, as one result (a step's) or two halves (a reset's: from then on,
        each half is stepped while the learner acts for the other)."""
        result = _take(result, slice(None))  # the caller's own arrays (Ray's come read-only from its object store)
        local = np.asarray(result[4]["env_id"])
        result[4]["env_id"] = local + self.offsets[i]
        write_rows(self._last_obs, result[4]["env_id"], result[0])
        if reset and len(local) >= 2:
            half = len(local) // 2
            self._ready.extend([_take(result, np.arange(half)), _take(result, np.arange(half, len(local)))])
        else:
            self._ready.append(result)

    # ------------------------------------------------------------------ a lost sampler
    def _restart(self, i: int, error: BaseException) -> None:
        """Sampler ``i`` died: its envs' episodes are reported lost (those in flight now, the others on their next
        send), and its new envs are reset once Ray has restarted it, without waiting: the other samplers' envs go on
        meanwhile."""
        ids = np.arange(self.offsets[i], self.offsets[i + 1])
        for call in [call for call, pending in self._in_flight.items() if pending.sampler == i]:
            del self._in_flight[call]  # lost with the sampler
        self.restarts.append(Restart.of_worker(i, tuple(ids.tolist()), "died", None, error))
        self._new_episode.pop(i, None)
        self._deferred[i] = []
        self._in_flight[self.actors[i].reset.remote(None)] = _Call(i, _Reply.RESTART, error, time.monotonic())
        self._stage[ids] = _Stage.LOST
        waiting = ids[self._out[ids]]
        self._ready = deque(r for r in self._ready if not np.isin(r[4]["env_id"], ids).any())
        if len(waiting):
            self._after_restart(i, _Stage.LOST, waiting)

    def _restarted(self, ref: Any, call: _Call) -> None:
        """The reset of a restarted sampler has returned (or Ray is still restarting it: ask again); the sends that
        waited for it are answered."""
        i, exceptions = call.sampler, self.ray.exceptions
        try:
            reset = _take(self.ray.get(ref), slice(None))
        except exceptions.ActorUnavailableError:  # still restarting
            if time.monotonic() - call.since > (self.group.start_timeout or float("inf")):
                raise
            self._in_flight[self.actors[i].reset.remote(None)] = call
            return
        except exceptions.RayActorError as final:
            raise self.group.gone(i, call.died_of) from final
        self.restarted(i)
        reset[4]["env_id"] = np.asarray(reset[4]["env_id"]) + self.offsets[i]
        self._new_episode[i] = reset
        for stage, ids in self._deferred.pop(i, []):
            self._after_restart(i, stage, ids)

    def _after_restart(self, i: int, stage: _Stage, ids: np.ndarray) -> None:
        """Envs ``ids`` of lost sampler ``i``, sent in ``stage``: their lost episodes or their new envs' first
        observations, as soon as what they need is here (the new envs' reset, for the first observations)."""
        needs_reset = stage == _Stage.RESET_OWED or self.autoreset_mode == AutoresetMode.SAME_STEP
        if needs_reset and i not in self._new_episode:
            self._deferred[i].append((stage, ids))
        elif stage == _Stage.LOST:
            self._ready.append(self._lost_episodes(i, ids))
        else:
            first = self._first_steps(i, ids)
            if first is not None:
                self._ready.append(first)

    def _lost_episodes(self, i: int, ids: np.ndarray) -> StepResult:
        """Envs ``ids`` of lost sampler ``i``: their episodes end truncated, with the last observations they
        returned (SAME_STEP: the new envs' first observations, the last ones as ``final_obs``)."""
        n = len(ids)
        flags = np.ones(n, dtype=bool)
        info: dict[str, Any] = {RESTARTED: flags, f"_{RESTARTED}": flags.copy(), "env_id": ids}
        last = take_rows(self._last_obs, ids)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:  # (no turn-based game: every env is in the reset)
            first = self._first_steps(i, ids)
            assert first is not None
            final_obs = np.empty(n, dtype=object)
            final_obs[:] = [take_rows(last, [k]) for k in range(n)]
            info.update({"final_obs": final_obs, "_final_obs": flags.copy(), "final_info": {}})
            info["_final_info"] = flags.copy()
            self._stage[ids] = _Stage.LIVE
            return first[0], np.zeros(n), np.zeros(n, dtype=bool), flags.copy(), info
        self._stage[ids] = _Stage.RESET_OWED
        return last, np.zeros(n), np.zeros(n, dtype=bool), flags.copy(), info

    def _first_steps(self, i: int, ids: np.ndarray) -> StepResult | None:
        """Envs ``ids`` of restarted sampler ``i``: their new envs' first observations (the reset done on restart).
        In a turn-based game the reset returns only the agents that move first; the others' first observations
        come from the sampler after their opponents' moves, as in any match (None if ``ids`` are all such)."""
        reset = self._new_episode[i]
        self._stage[ids] = _Stage.LIVE
        row_of = {env: row for row, env in enumerate(np.asarray(reset[4]["env_id"]).tolist())}
        rows = [row_of[env] for env in ids.tolist() if env in row_of]
        return _take(reset, np.array(rows, dtype=np.int64)) if rows else None

    # ------------------------------------------------------------------ gymnasium's API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.async_reset(seed, options)
        obs, _, _, _, info = self._gather()
        return obs, info

    def step(self, actions: Any) -> StepResult:
        self.send(actions, np.arange(self.num_envs))
        return self._gather()

    def _gather(self) -> StepResult:
        """``recv`` until every env has returned; their results in env order."""
        results = []
        while self._out.any():
            results.append(self.recv())
        obs = create_empty_array(self.single_observation_space, self.num_envs)
        rewards = np.zeros(self.num_envs)
        terminated, truncated = np.zeros(self.num_envs, dtype=bool), np.zeros(self.num_envs, dtype=bool)
        info: dict[str, Any] = {}
        for result in results:
            ids = result[4]["env_id"]
            write_rows(obs, ids, result[0])
            rewards[ids], terminated[ids], truncated[ids] = result[1], result[2], result[3]
            _place_info(info, {k: v for k, v in result[4].items() if k != "env_id"}, ids, self.num_envs)
        return obs, rewards, terminated, truncated, info


def _take(result: StepResult, rows: np.ndarray) -> StepResult:
    """Rows ``rows`` of a step's results, its info included (arrays and masks, nested dicts)."""
    obs, rewards, terminated, truncated, info = result
    parts = (rewards, terminated, truncated)
    return take_rows(obs, rows), *(take_rows(part, rows) for part in parts), take_rows(info, rows)


def _place_info(out: dict[str, Any], info: dict[str, Any], ids: np.ndarray, n: int) -> None:
    """Write a batch's vector info into ``out`` (every env's) at rows ``ids``: a key that other batches lack is
    zero there, its ``_key`` mask False, as in gymnasium's vector infos."""
    for key, value in info.items():
        if isinstance(value, dict):
            _place_info(out.setdefault(key, {}), value, ids, n)
            continue
        value = np.asarray(value)
        if key not in out:
            out[key] = np.zeros((n, *value.shape[1:]), dtype=value.dtype)
        out[key][ids] = value
