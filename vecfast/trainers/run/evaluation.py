"""``vecfast.evaluate``: run a policy for a fixed number of whole episodes and summarise them.

Episodes are counted without favouring short ones: with ``num_envs`` envs, env ``i`` contributes
its first ``episodes // num_envs`` episodes, plus one for ``i < episodes % num_envs``. Each
env's share is fixed before anything runs, so how long an episode takes never decides
whether it is counted (taking "the first ``episodes`` to finish" would over-represent short
episodes: the envs that finish fast finish more often).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

from vecfast.multiagent.slots import slot_layout_of
from vecfast.trainers import entry_defaults
from vecfast.trainers.algorithm.models import ActorCritic, as_obs_dict, obs_to_tensors, observation_spaces
from vecfast.trainers.run.env_source import EnvSource, source_of_run
from vecfast.trainers.run.policies import TrainResult, load_policy
from vecfast.trainers.sampling.episodes import EndedEpisode, EpisodeBoundaries, EpisodeTracker
from vecfast.vector import AsyncSharedMemVectorEnv

if TYPE_CHECKING:
    from vecfast.selfplay.matches import OpponentArg

DEFAULT_MAX_ENVS = 8  # envs evaluate builds at most, by default
# vector envs whose reset takes options["reset_mask"] in every autoreset mode (gymnasium >= 1.1's and vecfast's)
_PARTIAL_RESET = (SyncVectorEnv, AsyncVectorEnv, AsyncSharedMemVectorEnv)

EnvArg = str | Callable[[], VectorEnv] | VectorEnv


@dataclass(frozen=True)
class EvalResult:
    """Summary of ``episodes`` whole episodes; ``returns``/``lengths`` are per episode, env by env.

    ``std_return`` is the population standard deviation (``np.std``). ``metrics``: the mean
    of every numeric scalar the env reported in an episode's final info (e.g. PointNav's
    ``success`` and ``spl``, the Doom full games' ``frags``), over the episodes that
    reported it, also read as attributes (``result.success``, ``result.spl``; a name the env did
    not report raises AttributeError listing those it did). ``cut_episodes``: episodes stopped
    at ``max_steps`` (their returns and lengths are counted up to there; they report no metrics).
    """

    episodes: int
    mean_return: float
    std_return: float
    mean_length: float
    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    metrics: dict[str, float] = field(default_factory=dict)
    cut_episodes: int = 0

    def __getattr__(self, name: str) -> float:
        """A metric by name, as an attribute: ``result.success``, ``result.spl`` (PointNav), ``result.frags``."""
        metrics = self.__dict__.get("metrics", {})
        if name in metrics:
            return metrics[name]
        raise AttributeError(f"{type(self).__name__} has no attribute or metric {name!r}; metrics: {sorted(metrics)}")

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self.metrics})

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``json.dumps``."""
        data = dataclasses.asdict(self)
        data["returns"], data["lengths"] = list(self.returns), list(self.lengths)
        return data

    def lines(self) -> list[str]:
        """One line per episode, then the :meth:`summary`, for printing."""
        pairs = enumerate(zip(self.returns, self.lengths, strict=True))
        return [f"episode {i}: return {r:.2f}, length {n}" for i, (r, n) in pairs] + self.summary()

    def summary(self) -> list[str]:
        """The means over the episodes, then the metrics."""
        out = []
        cut = f", {self.cut_episodes} cut at max_steps" if self.cut_episodes else ""
        out.append(
            f"mean return {self.mean_return:.2f} +- {self.std_return:.2f}, mean length {self.mean_length:.1f} "
            f"over {self.episodes} episodes{cut}"
        )
        metrics = dict(self.metrics)
        if "win_rate_low" in metrics:  # games against an opponent
            low, high = metrics.pop("win_rate_low"), metrics.pop("win_rate_high")
            out.append(f"win rate {metrics.pop('win_rate'):.3f} (95% interval {low:.3f} to {high:.3f})")
        if metrics:
            out.append("metrics: " + ", ".join(f"{k} {v:.4g}" for k, v in metrics.items()))
        return out


def evaluate(
    policy_or_run_dir: ActorCritic | TrainResult | str | os.PathLike,
    env: EnvArg | None = None,
    episodes: int | None = None,
    deterministic: bool = True,
    num_envs: int | None = None,
    seed: int | None = entry_defaults.EVALUATION_SEED,
    which: str = entry_defaults.CHECKPOINT,
    max_steps: int | None = None,
    on_frame: Callable[[np.ndarray], None] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    opponent: OpponentArg | None = None,
) -> EvalResult:
    """Run ``episodes`` whole episodes of a policy (default 10) and return their :class:`EvalResult`.

    ``policy_or_run_dir``: an :class:`ActorCritic`, a :class:`TrainResult` or a run directory
    (its checkpoint ``which``, ``"last"`` or ``"best"``, as :func:`load_policy` loads it).
    ``env``: a gymnasium id (default: the run's, from ``RUN_DIR/config.json``), built as
    ``vecfast.train`` builds it, a function returning a VectorEnv (closed afterwards) or a
    VectorEnv (left open). ``env_kwargs``: keyword arguments for the env an id builds, over the
    run's own where it is the run's env (a run of PointNav on ``scenes=DIR`` evaluates on DIR;
    ``env_kwargs={"split": "val"}`` takes its scenes never trained on). ``num_envs``: envs of a built
    env (default ``min(episodes, 8)``, 1 with ``on_frame``); env ``i`` of ``n`` plays ``episodes // n``
    episodes, plus one if ``i < episodes % n`` (see the module docstring), and the results list them env by env.

    The policy acts as the trainers' samplers run it: its recurrent state restarts on each
    episode's first observation, its normalisation statistics are used and not updated, and
    torch uses one CPU thread meanwhile (the env workers need the cores).
    ``deterministic``: take the most likely action, else sample (torch's RNG seeded with
    ``seed`` for the call, then restored). ``seed``: the env reset seed (env ``i`` gets
    ``seed + i``; ``None``: unseeded). Any gymnasium autoreset mode works.

    ``max_steps``: stop an episode after this many steps and count it as it stands (``None``:
    episodes last until the env ends them). The env then starts a fresh episode with a
    partial reset (``options["reset_mask"]``) where the vector env supports one (gymnasium's,
    vecfast's), otherwise its steps count for nothing until its own episode ends.

    ``on_frame``: called with env 0's frame (``env.render()[0]``) after every step that counts
    towards one of env 0's episodes (a built env renders ``rgb_array``); with ``num_envs=1``
    that is a video of every episode in order.

    Games of agents (``env``: a PettingZoo module such as ``pettingzoo.classic.connect_four_v3`` or vecfast's
    ``doom_duel_v0``, whose ``env(**env_kwargs)`` or ``vector_env(M, **env_kwargs)`` makes its matches, a function
    making a PettingZoo env, or a vector env of matches of agents; a run trained on a module plays its own) are
    ``episodes`` whole games (default 200: a win rate from 10 games says little) against ``opponent`` (default
    ``"random"``), as :func:`vecfast.selfplay.matches.play_matches` plays them on ``num_envs`` matches at once
    (default as above): seats alternate game by game, the matches reset with ``seed`` (match ``m``: ``seed + m``).
    ``opponent``: ``"random"`` (a random legal move, or action), ``"initial"`` (the untrained model of the run's
    config, initialised from ``seed``), a run directory or checkpoint, an ActorCritic, or a bot
    ``bot(observation) -> action`` (:mod:`vecfast.selfplay.bots`). Returns and lengths are the policy's (its
    rewards and its moves); the metrics ``win_rate``, ``draw_rate`` and ``loss_rate`` count games by the env's
    ``outcome`` where it reports one (Doom), else by the sign of the policy's return; ``win_rate_low`` and
    ``win_rate_high`` bound the win rate (Wilson's 95% interval). ``on_frame`` gets match 0's frames; ``max_steps``
    does not apply to games.
    """
    if episodes is not None and episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1 or None, got {max_steps}")
    policy, run_dir = _policy(policy_or_run_dir, which)
    env_kwargs = dict(env_kwargs or {})
    run = run_env(run_dir, required=False) if run_dir is not None and (env is None or isinstance(env, str)) else None
    if env is None and run is not None and run.source.is_game:
        env = run.source.env  # a run of a PettingZoo module plays its games
    layout = slot_layout_of(env) if isinstance(env, VectorEnv) else None
    if opponent is not None or isinstance(env, types.ModuleType) or (layout is not None and layout.num_agents >= 2):
        if max_steps is not None:
            raise ValueError("max_steps: not for games against an opponent, which play whole games")
        games = entry_defaults.EVALUATION_GAMES if episodes is None else episodes
        matches = _num_envs(num_envs, games, on_frame)
        return _games(
            policy, run_dir, env, opponent or "random", games, matches, deterministic, seed, env_kwargs, on_frame
        )
    episodes = entry_defaults.EVALUATION_EPISODES if episodes is None else episodes
    if run_dir is not None and env is None and run is None:
        run_env(run_dir)  # raises why the run's env cannot be made again
    if run is not None and env in (None, run.source.id):  # the run's own env, the other arguments over its own
        vec_env = run.with_kwargs(env_kwargs).build(_num_envs(num_envs, episodes, on_frame), _render_mode(on_frame))
    elif env is None:
        raise ValueError("evaluating a policy object needs env=: a policy does not say which env it was trained on")
    else:
        vec_env = _build(env, episodes, num_envs, on_frame, env_kwargs)
    try:
        _check_spaces(policy, vec_env)
        if on_frame is not None and vec_env.render_mode != "rgb_array":
            raise ValueError(f"on_frame needs an env with render_mode='rgb_array', got {vec_env.render_mode!r}")
        with _acting(policy, seed):
            return _Episodes(policy, vec_env, episodes, deterministic, seed, max_steps, on_frame).run()
    finally:
        if vec_env is not env:
            vec_env.close()


def episode_quotas(episodes: int, num_envs: int) -> np.ndarray:
    """How many of the ``episodes`` each env plays (see the module docstring)."""
    return np.array([episodes // num_envs + (i < episodes % num_envs) for i in range(num_envs)])


class _Episodes:
    """The stepping loop of :func:`evaluate`: where episodes begin and end, and their returns and lengths, as the
    trainers' sampler has them (:class:`EpisodeBoundaries`, :class:`EpisodeTracker`), plus each env's quota and
    the ``max_steps`` cuts. Not the :class:`~vecfast.trainers.sampling.sampler.Sampler` itself: that one stores
    trajectories, acts through ``send``/``recv`` on envs that autoreset on the next step and samples its actions;
    evaluation steps any autoreset mode whole, resets envs itself, and may take the most likely action."""

    def __init__(
        self,
        policy: ActorCritic,
        env: VectorEnv,
        episodes: int,
        deterministic: bool,
        seed: int | None,
        max_steps: int | None,
        on_frame: Callable[[np.ndarray], None] | None,
    ) -> None:
        n = env.num_envs
        self.policy, self.env, self.seed = policy, env, seed
        self.deterministic, self.max_steps, self.on_frame = deterministic, max_steps, on_frame
        self.mode = AutoresetMode(env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
        self.partial_reset = self.mode == AutoresetMode.DISABLED or isinstance(env.unwrapped, _PARTIAL_RESET)
        self.targets = episode_quotas(episodes, n)
        self.device = next(policy.parameters()).device
        self.episodes: list[list[EndedEpisode]] = [[] for _ in range(n)]
        self.cut = 0

    def run(self) -> EvalResult:
        env, n, policy, dev = self.env, self.env.num_envs, self.policy, self.device
        obs, _ = env.reset(seed=self.seed)
        state = policy.initial_state(n, dev)
        boundaries, tracker = EpisodeBoundaries(n, self.mode, dev), EpisodeTracker(n, mode=self.mode)
        # cut at max_steps without a partial reset: its steps count for nothing until its episode ends
        draining = np.zeros(n, dtype=bool)
        collected = np.zeros(n, dtype=np.int64)
        while (collected < self.targets).any():
            tensors = obs_to_tensors(as_obs_dict(obs), dev)
            dist, _, state = policy.step(tensors, state, boundaries.first)
            chosen = dist.mode() if self.deterministic else dist.sample()
            state = policy.with_action(state, chosen)
            valid = boundaries.valid.clone()
            obs, rewards, terminated, truncated, info = env.step(policy.actor.to_env(chosen))
            done = _numpy(terminated).astype(bool) | _numpy(truncated).astype(bool)
            live = valid.cpu().numpy() & ~draining & (collected < self.targets)  # steps of counted episodes
            ended = tracker.record(slice(None), _numpy(rewards).astype(np.float64), done & live, live, info)
            if self.on_frame is not None and live[0]:
                self.on_frame(np.asarray(env.render()[0]))
            if self.max_steps is not None:
                cut = live & ~done & (tracker.lengths_so_far >= self.max_steps)
                ended += tracker.cut(np.flatnonzero(cut))
                self.cut += int(cut.sum())
            else:
                cut = np.zeros(n, dtype=bool)
            for episode in ended:
                if episode.restarted:  # cut short by a restart of its env: that env plays another instead
                    continue
                self.episodes[episode.env].append(episode)
                collected[episode.env] += 1
            draining[done] = False
            boundaries.stepped(slice(None), valid, torch.from_numpy(done).to(dev))
            restart = done if self.mode == AutoresetMode.DISABLED else np.zeros(n, dtype=bool)
            if self.partial_reset:
                restart = restart | cut
            else:
                draining |= cut
            if restart.any():
                obs, _ = env.reset(options={"reset_mask": restart})
                boundaries.restarted(torch.from_numpy(restart).to(dev))
        return self._result()

    def _result(self) -> EvalResult:
        flat = [episode for per_env in self.episodes for episode in per_env]
        reported: dict[str, list[float]] = {}
        for episode in flat:
            for key, value in episode.metrics.items():
                reported.setdefault(key, []).append(value)
        metrics = {key: float(np.mean(values)) for key, values in sorted(reported.items())}
        returns, lengths = [e.episode_return for e in flat], [e.length for e in flat]
        return _summarise(returns, lengths, metrics, self.cut)


def _summarise(returns: Any, lengths: Any, metrics: dict[str, float], cut_episodes: int = 0) -> EvalResult:
    returns, lengths = np.asarray(returns, dtype=np.float64), np.asarray(lengths, dtype=np.int64)
    return EvalResult(
        episodes=len(returns),
        mean_return=float(returns.mean()),
        std_return=float(returns.std()),
        mean_length=float(lengths.mean()),
        returns=tuple(returns.tolist()),
        lengths=tuple(lengths.tolist()),
        metrics=metrics,
        cut_episodes=cut_episodes,
    )


def _games(
    policy: ActorCritic,
    source: Path | None,
    env: Any,
    opponent: OpponentArg,
    games: int,
    num_matches: int,
    deterministic: bool,
    seed: int | None,
    env_kwargs: dict[str, Any],
    on_frame: Callable[[np.ndarray], None] | None,
) -> EvalResult:
    """:func:`evaluate` on matches of agents: ``games`` whole games against ``opponent``, on the vector env of agent
    slots ``env`` is, or that ``num_matches`` matches of ``env`` (a PettingZoo module or function) make."""
    from vecfast.multiagent.from_pettingzoo import vector_env_from  # the pettingzoo extra
    from vecfast.selfplay.matches import opponent_from, play_matches

    if on_frame is not None:
        env_kwargs = {**env_kwargs, "render_mode": "rgb_array"}
    not_games = (
        "games against an opponent need env= a PettingZoo module such as pettingzoo.classic.connect_four_v3, a "
        "function making a PettingZoo env, or a vector env of matches of agents (a run's own env when it trained on "
        f"a module), got {env!r}"
    )
    if isinstance(env, VectorEnv):
        matches = env
    elif isinstance(env, types.ModuleType) or callable(env):
        try:
            matches = vector_env_from(env, num_matches, env_kwargs=env_kwargs)
        except TypeError as exc:
            raise ValueError(not_games) from exc
    else:
        raise ValueError(not_games)
    layout = slot_layout_of(matches)
    try:
        if layout is None or layout.num_agents < 2:
            raise ValueError(not_games)
        if on_frame is not None and matches.render_mode != "rgb_array":
            raise ValueError(f"on_frame needs an env with render_mode='rgb_array', got {matches.render_mode!r}")
        with _acting(policy, seed):
            player = opponent_from(opponent, policy, source, seed)
            results = play_matches(policy, player, matches, games, seed, deterministic, on_frame)
    finally:
        if matches is not env:
            matches.close()
    low, high = results.win_rate_interval()
    rates = {"win_rate": results.win_rate, "draw_rate": results.draw_rate, "loss_rate": results.loss_rate}
    rates |= {"win_rate_low": low, "win_rate_high": high}
    return _summarise(results.returns, results.lengths, rates)


@contextlib.contextmanager
def _acting(policy: ActorCritic, seed: int | None) -> Iterator[None]:
    """Act without gradients on one torch thread, torch's RNG seeded with ``seed`` for the while, then restored."""
    device = next(policy.parameters()).device
    rng_devices = [device] if device.type == "cuda" else []
    with _one_torch_thread(), torch.no_grad(), torch.random.fork_rng(devices=rng_devices):
        if seed is not None:
            torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Act with one CPU thread, as the trainers do: the env workers need the cores (and small batches
    run many times slower on threads that compete with them)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _policy(
    policy_or_run_dir: ActorCritic | TrainResult | str | os.PathLike, which: str
) -> tuple[ActorCritic, Path | None]:
    if isinstance(policy_or_run_dir, ActorCritic):
        return policy_or_run_dir, None
    if isinstance(policy_or_run_dir, TrainResult):
        return policy_or_run_dir.policy, Path(policy_or_run_dir.run_dir)
    if isinstance(policy_or_run_dir, (str, os.PathLike)):
        return load_policy(policy_or_run_dir, which), Path(policy_or_run_dir)
    raise TypeError(
        f"expected an ActorCritic, a TrainResult or a run directory, got {type(policy_or_run_dir).__name__}"
    )


@dataclass(frozen=True)
class RunEnv:
    """The env a run directory's policy was trained on: its source and how it was vectorised (``None``: a run
    from before vecfast recorded it, whose env was the id's batched simulator where it has one)."""

    source: EnvSource
    vectorization: str | None

    def with_kwargs(self, env_kwargs: Mapping[str, Any]) -> RunEnv:
        """The same env with ``env_kwargs`` over the run's own (PointNav's ``split="val"``)."""
        return dataclasses.replace(self, source=EnvSource.of(self.source.env, {**self.source.kwargs, **env_kwargs}))

    def build(self, num_envs: int, render_mode: str | None = None, heal: bool = True) -> VectorEnv:
        """Its envs; in worker processes they heal unless ``heal`` is False (a crashed game is rebuilt, and its
        episode, cut short, is played again)."""
        return self.source.build(num_envs, self.vectorization, render_mode=render_mode, restart_failed_workers=heal)


def run_env(run_dir: str | os.PathLike, required: bool = True) -> RunEnv | None:
    """The env of ``RUN_DIR/config.json``; one that cannot be made again (the run got an env object or factory) is
    a ValueError, or None unless ``required``."""
    config = json.loads((Path(run_dir) / "config.json").read_text())
    try:
        source = source_of_run(config["env"], config.get("env_kwargs", {}))
    except ValueError as exc:
        if not required:
            return None
        raise ValueError(f"{run_dir}: {exc}") from None
    return RunEnv(source, config.get("vectorization"))


def _num_envs(num_envs: int | None, episodes: int, on_frame: Callable[[np.ndarray], None] | None) -> int:
    if num_envs is not None and num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    return num_envs or (1 if on_frame is not None else min(episodes, DEFAULT_MAX_ENVS))


def _render_mode(on_frame: Callable[[np.ndarray], None] | None) -> str | None:
    return "rgb_array" if on_frame is not None else None


def _build(
    env: EnvArg,
    episodes: int,
    num_envs: int | None,
    on_frame: Callable[[np.ndarray], None] | None,
    env_kwargs: dict[str, Any],
) -> VectorEnv:
    if isinstance(env, str):
        return RunEnv(EnvSource.of(env, env_kwargs), None).build(
            _num_envs(num_envs, episodes, on_frame), _render_mode(on_frame)
        )
    if env_kwargs:
        raise TypeError(f"env keyword arguments {sorted(env_kwargs)} need an env id; the env given is built")
    built = env if isinstance(env, VectorEnv) else env() if callable(env) else None
    if not isinstance(built, VectorEnv):
        what = type(env if built is None else built).__name__
        raise TypeError(f"env must be a gymnasium id, a VectorEnv or a function returning one, got {what}")
    if num_envs is not None and built.num_envs != num_envs:
        if built is not env:
            built.close()
        raise ValueError(f"num_envs={num_envs} but the given env has {built.num_envs} envs")
    return built


def _check_spaces(policy: ActorCritic, env: VectorEnv) -> None:
    """The env's observations and actions must be the ones the policy was built for."""
    mine, theirs = observation_spaces(policy.observation_space), _entries(env.single_observation_space)
    same = mine.keys() == theirs.keys() and all(_same_layout(mine[k], theirs[k]) for k in mine)
    if not same or not _same_layout(policy.action_space, env.single_action_space):
        raise ValueError(
            f"the policy was trained on observations {policy.observation_space} and actions {policy.action_space}, "
            f"the env has {env.single_observation_space} and {env.single_action_space}: "
            "pass env= the env the policy was trained on"
        )


def _entries(space: spaces.Space) -> dict[str, spaces.Space]:
    try:
        return observation_spaces(space)
    except TypeError:
        return {"": space}  # a layout ActorCritic cannot take: mismatches every policy


def _same_layout(a: spaces.Space, b: spaces.Space) -> bool:
    if type(a) is not type(b) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if isinstance(a, spaces.Discrete):
        return int(a.n) == int(b.n) and int(a.start) == int(b.start)
    if isinstance(a, spaces.MultiDiscrete):
        return np.array_equal(a.nvec, b.nvec) and np.array_equal(a.start, b.start)
    return True


__all__ = ["EvalResult", "RunEnv", "evaluate", "run_env"]
