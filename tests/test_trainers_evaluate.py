"""``vecfast.evaluate``: exactly N whole episodes, counted without favouring short ones, final-info metrics,
every autoreset mode, ``max_steps``; ``ActorCritic.act`` on one observation; ``enjoy`` evaluates."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from helpers import decoded

import vecfast
from vecfast.envs.nav import BatchedPointNavEnv
from vecfast.envs.nav.scenes import make_scenes
from vecfast.trainers import ActorCritic, EvalResult, TrainConfig, TrainResult, evaluate, load_policy, train
from vecfast.trainers.run.env_source import EnvSource
from vecfast.trainers.sampling.episodes import EndedEpisode
from vecfast.trainers.sampling.sampler import Sampler, StepAsRecv
from vecfast.trainers.tools.enjoy import enjoy

FAST = {"num_workers": 1, "num_envs_per_worker": 4, "rollout": 16, "batch_size": 64}
TINY = {"encoder_mlp_layers": (16,), "rnn_size": 16, "nonlinearity": "tanh"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    run_dir = tmp_path_factory.mktemp("evaluate") / "run"
    return train("CartPole-v1", algo="ppo", total_env_steps=2048, run_dir=run_dir, seed=0, **FAST)


class CountdownEnv(gym.Env):
    """Episodes of exactly ``length`` steps paying 1 per step.

    The observation's first entry is the step within the episode over ``length`` (0: the
    episode's first observation). Every step's info has ``steps``; the last one adds
    ``score`` (``10 * length``), ``won`` and values that are no numeric scalars.
    """

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(3)

    def __init__(self, length: int) -> None:
        self.length, self.t = length, 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t / self.length, np.sin(self.t)], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        info: dict[str, Any] = {"steps": self.t}
        if self.t == self.length:
            info.update(score=10.0 * self.length, won=True, name="end", trace=np.zeros(3))
        return self._obs(), 1.0, self.t == self.length, False, info


def countdown_envs(lengths: list[int], mode: AutoresetMode = AutoresetMode.NEXT_STEP) -> SyncVectorEnv:
    fns = [functools.partial(CountdownEnv, n) for n in lengths]
    return SyncVectorEnv(fns, autoreset_mode=mode)


class NoPartialReset(VectorEnv):
    """A vector env whose reset takes no ``reset_mask`` (as BatchedPointNavEnv): evaluate must not need one."""

    def __init__(self, env: VectorEnv) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self.metadata = env.metadata
        self.single_observation_space, self.observation_space = env.single_observation_space, env.observation_space
        self.single_action_space, self.action_space = env.single_action_space, env.action_space

    def reset(self, *, seed: Any = None, options: dict | None = None) -> tuple[Any, dict]:
        if options and "reset_mask" in options:
            raise ValueError("no partial resets here")
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: Any) -> tuple:
        return self.env.step(actions)


@pytest.mark.parametrize("algo", ["ppo", "appo"])
def test_training_logs_the_env_metrics_that_evaluate_reports(algo: str, tmp_path: Path) -> None:
    """The final infos' numbers (PointNav's success and SPL) go into metrics.jsonl as the means over the last
    stats_avg episodes: by the same rule as evaluate's metrics."""
    train(lambda: countdown_envs([4, 6]), algo=algo, total_env_steps=240, run_dir=tmp_path, rollout=8,
          batch_size=16, use_rnn=False, **TINY)  # fmt: skip
    last = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
    assert 10 < last["episodes"] < 100  # all of them in the 100-episode window
    assert last["won"] == 1.0 and last["score"] == pytest.approx(10 * last["steps"])
    assert 4 < last["steps"] < 6  # the mean over both envs' episodes: 4 and 6 steps
    assert "name" not in last and "trace" not in last  # no numeric scalars
    result = evaluate(tmp_path, lambda: countdown_envs([4, 6]), episodes=4)
    assert result.metrics == {"score": 50.0, "steps": 5.0, "won": 1.0}


def policy_for(env: VectorEnv, **overrides: Any) -> ActorCritic:
    cfg = TrainConfig.from_overrides(**{**TINY, "use_rnn": False, **overrides})
    return ActorCritic(env.single_observation_space, env.single_action_space, cfg)


# ----------------------------------------------------------------------------- whole runs


def test_evaluate_a_run_dir_runs_exactly_n_episodes_of_its_env(trained: TrainResult) -> None:
    result = evaluate(trained.run_dir, episodes=5, num_envs=2)
    assert isinstance(result, EvalResult) and result.episodes == 5
    assert len(result.returns) == len(result.lengths) == 5
    assert result.returns == tuple(float(n) for n in result.lengths)  # CartPole pays 1 per step
    assert result.mean_return == pytest.approx(np.mean(result.returns))
    assert result.std_return == pytest.approx(np.std(result.returns))
    assert result.mean_length == pytest.approx(np.mean(result.lengths)) and result.cut_episodes == 0
    assert json.loads(json.dumps(result.to_dict()))["returns"] == list(result.returns)
    # the same episodes from the policy object, from the TrainResult and through vecfast's lazy export
    assert evaluate(load_policy(trained.run_dir), "CartPole-v1", episodes=5, num_envs=2) == result
    assert evaluate(trained, episodes=5, num_envs=2) == result
    assert vecfast.evaluate(trained.run_dir, episodes=5, num_envs=2) == result


def test_evaluate_checks_its_arguments(trained: TrainResult) -> None:
    with pytest.raises(ValueError, match="needs env="):
        evaluate(trained.policy)
    with pytest.raises(ValueError, match="trained on observations"):
        evaluate(trained.policy, countdown_envs([3]), episodes=1)
    with pytest.raises(ValueError, match="episodes must be >= 1"):
        evaluate(trained, episodes=0)
    with pytest.raises(ValueError, match="num_envs=3 but the given env has 2"):
        evaluate(trained.policy, lambda: countdown_envs([3, 3]), num_envs=3)


# ----------------------------------------------------------------------------- counting and metrics


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_each_env_plays_a_fixed_share_whatever_its_episode_length(mode: AutoresetMode) -> None:
    """Env 0's episodes last 1 step, env 1's 10: taking the first 4 episodes to finish would take four short ones."""
    env = countdown_envs([1, 10], mode)
    policy = policy_for(env)
    result = evaluate(policy, env, episodes=4)
    assert result.lengths == (1, 1, 10, 10) and result.returns == (1.0, 1.0, 10.0, 10.0)
    assert result.mean_length == 5.5 and result.episodes == 4
    # final infos: numeric scalars only (not the string, not the array), averaged over the episodes
    assert result.metrics == {"score": 55.0, "steps": 5.5, "won": 1.0}
    odd = evaluate(policy, env, episodes=5)  # env 0 plays the extra one
    assert odd.lengths == (1, 1, 1, 10, 10) and odd.metrics["score"] == pytest.approx(230 / 5)
    env.step(np.zeros(2, dtype=np.int64))  # a given env is left open
    env.close()


def test_max_steps_cuts_episodes_and_restarts_the_env() -> None:
    env = countdown_envs([2, 10])
    result = evaluate(policy_for(env), env, episodes=4, max_steps=4)
    assert result.lengths == (2, 2, 4, 4) and result.cut_episodes == 2
    assert result.metrics["score"] == 20.0  # cut episodes report no final info
    # without partial resets a cut env's steps count for nothing until its episode ends
    drained = evaluate(policy_for(env), NoPartialReset(env), episodes=4, max_steps=4)
    assert drained.lengths == result.lengths and drained.cut_episodes == 2
    env.close()


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_the_recurrent_state_restarts_on_each_episodes_first_observation(mode: AutoresetMode) -> None:
    """``first`` (which zeroes the GRU state) is set exactly where an observation is step 0 of an episode:
    after NEXT_STEP's reset step, with SAME_STEP's end, after DISABLED's and max_steps' partial resets."""
    env = countdown_envs([3, 5], mode)
    policy = policy_for(env, use_rnn=True)
    step, seen = policy.step, []

    def spy(obs: dict, state: Any, first: Any) -> Any:
        seen.append((obs["obs"][:, 0].numpy().copy(), first.numpy().copy()))
        return step(obs, state, first)

    policy.step = spy
    result = evaluate(policy, env, episodes=6, max_steps=4)
    assert result.lengths == (3, 3, 3, 4, 4, 4) and result.cut_episodes == 3
    assert len(seen) >= 12
    for position, first in seen:
        np.testing.assert_array_equal(first, position == 0)
    env.close()


def test_evaluate_counts_the_episodes_the_trainers_sampler_counts() -> None:
    """One rule for where episodes begin and end: the sampler's finished episodes, env by env, are evaluate's."""
    env = countdown_envs([2, 3])
    policy = policy_for(env, use_rnn=True)
    heard: list[EndedEpisode] = []
    sampler = Sampler(StepAsRecv(env), policy, 4, 2, on_episode_end=lambda e, number: heard.append(e), seed=0)
    received = sampler.reset()
    for _ in range(3):
        for _ in range(4):
            sampler.step(received)
            received = sampler.observe()
        sampler.end_trajectories(received)
        sampler.release(sampler.take_full(2))
    by_env = [[e for e in heard if e.env == i][:3] for i in range(2)]
    result = evaluate(policy, env, episodes=6)
    assert result.lengths == tuple(e.length for per_env in by_env for e in per_env) == (2, 2, 2, 3, 3, 3)
    assert result.returns == tuple(e.episode_return for per_env in by_env for e in per_env)
    assert result.metrics == {"score": 25.0, "steps": 2.5, "won": 1.0}
    assert all(e.metrics == {"score": 10.0 * e.length, "steps": e.length, "won": 1.0} for e in heard)
    env.close()


def test_env_keyword_arguments_reach_the_env_and_metrics_read_as_attributes(tmp_path: Path) -> None:
    """evaluate(..., env_kwargs={"split": "val"}) builds PointNav's held-out scenes (its batched env);
    result.success and result.spl are the final infos' means."""
    make_scenes(2, seed=1, out_dir=tmp_path / "val")
    spec_env = BatchedPointNavEnv(2, scenes=tmp_path, split="val", width=40, height=40)
    policy = policy_for(spec_env)
    spec_env.close()
    nav = {"scenes": tmp_path, "width": 40, "height": 40}
    result = evaluate(policy, "vecfast/PointNav-v0", episodes=4, num_envs=2, env_kwargs={**nav, "split": "val"},
                      deterministic=False)  # fmt: skip
    assert result.success == result.metrics["success"] and result.spl == result.metrics["spl"]
    with pytest.raises(AttributeError, match="no attribute or metric 'frags'; metrics: \\['distance_to_goal'"):
        result.frags  # noqa: B018
    with pytest.raises(FileNotFoundError, match="no 'train' scenes"):  # only a val set there: the kwargs arrived
        evaluate(policy, "vecfast/PointNav-v0", episodes=1, env_kwargs={**nav, "split": "train"})
    env = BatchedPointNavEnv(2, scenes=tmp_path, split="val", width=40, height=40)
    with pytest.raises(TypeError, match="need an env id"):
        evaluate(policy, env, episodes=2, env_kwargs={"split": "val"})
    env.close()


def test_a_pointnav_run_evaluates_on_the_held_out_scenes(tmp_path: Path) -> None:
    """evaluate(run_dir, env_kwargs={"split": "val"}): the run's policy on the val scenes of the directory it
    trained on (the run's env arguments), in the batched env (one simulator, not a process per env)."""
    scenes = tmp_path / "scenes"
    make_scenes(1, seed=0, out_dir=scenes / "train")
    make_scenes(1, seed=1, out_dir=scenes / "val")
    nav = {"scenes": scenes, "width": 40, "height": 40, "max_episode_steps": 20}
    run = train("vecfast/PointNav-v0", algo="ppo", total_env_steps=64, run_dir=tmp_path / "run", env_kwargs=nav,
                num_envs=2, rollout=16, batch_size=32, use_rnn=False, **TINY)  # fmt: skip
    eval_env = EnvSource.of("vecfast/PointNav-v0", {"split": "val", **nav}).build(2)
    try:
        assert isinstance(eval_env, BatchedPointNavEnv)  # its vector_entry_point
        assert set(eval_env.resident_scenes) == {"scene_1_00000"}
    finally:
        eval_env.close()
    result = evaluate(run.run_dir, env_kwargs={"split": "val"}, episodes=4, num_envs=2)
    assert result.episodes == 4 and max(result.lengths) <= 20  # max_episode_steps reached the env
    assert 0.0 <= result.success <= 1.0 and 0.0 <= result.spl <= result.success
    assert (result.success, result.spl) == (result.metrics["success"], result.metrics["spl"])


def test_pointnav_success_and_spl_come_from_the_final_infos(tmp_path: Path) -> None:
    make_scenes(2, seed=1, out_dir=tmp_path)
    env = BatchedPointNavEnv(3, scenes=tmp_path, width=40, height=40)  # depth is an image: convnet_simple's least
    try:
        result = evaluate(policy_for(env), env, episodes=6, deterministic=False)
        assert result.episodes == 6 and len(result.lengths) == 6
        assert {"success", "spl", "distance_to_goal", "episode_return", "episode_length"} <= set(result.metrics)
        assert 0.0 <= result.metrics["success"] <= 1.0 and 0.0 <= result.metrics["spl"] <= 1.0
        assert result.metrics["episode_length"] == pytest.approx(result.mean_length)
        assert result.metrics["episode_return"] == pytest.approx(result.mean_return, abs=1e-4)
    finally:
        env.close()


# ----------------------------------------------------------------------------- act


def test_act_on_one_observation_returns_one_action(trained: TrainResult) -> None:
    policy = trained.policy
    obs, _ = gym.make("CartPole-v1").reset(seed=0)
    one = policy.act(obs, deterministic=True)
    assert np.ndim(one) == 0 and policy.action_space.contains(int(one))
    assert one == policy.act(obs[None], deterministic=True)[0]
    batch = np.stack([obs, -obs, obs * 2])
    assert policy.act(batch, deterministic=True).shape == (3,)
    for bad in (obs[:3], np.stack([batch, batch])):
        with pytest.raises(ValueError, match=r"expected \(4,\) \(one observation\) or \(batch, \*\(4,\)\)"):
            policy.act(bad)


def test_act_on_one_dict_observation_of_a_recurrent_policy() -> None:
    obs_space = spaces.Dict({"pos": spaces.Box(-1, 1, (3,), np.float32), "cell": spaces.Discrete(5)})
    cfg = TrainConfig.from_overrides(**TINY, use_rnn=True)
    policy = ActorCritic(obs_space, spaces.MultiDiscrete([3, 2]), cfg)
    obs = obs_space.sample()
    one = policy.act(obs, deterministic=True, episode_start=True)
    assert one.shape == (2,)
    batched = policy.act({k: np.asarray(v)[None] for k, v in obs.items()}, deterministic=True, episode_start=[True])
    np.testing.assert_array_equal(one, batched[0])
    with pytest.raises(ValueError, match="disagree on the batch"):
        policy.act({"pos": obs["pos"], "cell": np.array([1, 2])})
    with pytest.raises(ValueError, match=r"lacks entries \['cell'\]"):
        policy.act({"pos": obs["pos"]})


def test_on_frame_gets_env_0s_frames_of_the_counted_steps(trained: TrainResult) -> None:
    frames: list[np.ndarray] = []
    result = evaluate(trained, episodes=2, max_steps=3, on_frame=frames.append)  # one env by default
    assert result.lengths == (3, 3) and len(frames) == 6
    assert all(f.shape == (400, 600, 3) and f.dtype == np.uint8 for f in frames)
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        evaluate(trained, lambda: vecfast.make_vec("CartPole-v1", 1, vectorization_mode="sync"), on_frame=print)


# ----------------------------------------------------------------------------- enjoy


def test_enjoy_reports_what_evaluate_measures(trained: TrainResult, tmp_path: Path) -> None:
    result = enjoy(trained.run_dir, episodes=3, num_envs=3)
    assert result == evaluate(trained.run_dir, episodes=3, num_envs=3, max_steps=10_000)
    video = tmp_path / "cartpole.mp4"
    recorded = enjoy(trained.run_dir, episodes=2, video=video, max_steps=6)
    assert recorded.lengths == (6, 6) and recorded.cut_episodes == 2
    meta, frames = decoded(video)
    assert meta["codec"].startswith("h264") and len(frames) == 12  # the counted steps' frames, episode by episode


def test_evaluate_builds_the_env_a_run_trained_on_whichever_scheme_chose_it(tmp_path: Path) -> None:
    """PointNav has a batched simulator (sync PPO's) and single envs (APPO's, which needs send/recv): the run
    records which it trained on and evaluate builds that one, as an id whose two differ (ale-py's preprocessed
    AtariVectorEnv against raw frames) needs."""
    from vecfast.trainers.run.evaluation import run_env
    from vecfast.vector import AsyncSharedMemVectorEnv

    make_scenes(1, seed=0, out_dir=tmp_path / "scenes")
    nav = {"scenes": tmp_path / "scenes", "width": 16, "height": 16, "max_episode_steps": 5}
    for algo, vectorization, kind in [("ppo", "vector_entry_point", BatchedPointNavEnv),
                                      ("appo", "shared_memory", AsyncSharedMemVectorEnv)]:  # fmt: skip
        run_dir = tmp_path / algo
        train("vecfast/PointNav-v0", algo=algo, total_env_steps=64, run_dir=run_dir, env_kwargs=nav, num_envs=2,
              rollout=16, batch_size=32, use_rnn=False, **TINY)  # fmt: skip
        run = run_env(run_dir)
        assert run.vectorization == vectorization
        env = run.build(2)
        try:
            assert isinstance(env.unwrapped, kind)
        finally:
            env.close()
        assert len(evaluate(run_dir, episodes=2).returns) == 2


def test_an_atari_run_evaluates_on_the_frames_it_trained_on(tmp_path: Path) -> None:
    """The issue's case: APPO trained ``ALE/Pong-v5`` on single envs' (210, 160, 3) frames, while ale-py's batched
    AtariVectorEnv gives (4, 84, 84) stacks; evaluate built the latter and could not run the policy."""
    pytest.importorskip("ale_py")
    run_dir = tmp_path / "pong"
    train("ALE/Pong-v5", algo="appo", total_env_steps=64, run_dir=run_dir, num_workers=1, num_envs_per_worker=2,
          rollout=16, batch_size=32, rnn_size=32, encoder_conv_mlp_layers=(32,))  # fmt: skip
    result = evaluate(run_dir, episodes=2, max_steps=20)
    assert result.lengths == (20, 20)
