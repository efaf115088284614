"""SB3VecEnv behaves as SB3's own VecEnvs, and SB3 trains through it.

Step results (observations, float32 rewards, dones, per-env infos with
``terminal_observation`` and ``TimeLimit.truncated``, ``reset_infos``) must be
bit-identical to ``DummyVecEnv`` over the same envs, seeds and actions, whatever the
vector env's autoreset mode; ``env_method``/``get_attr``/``set_attr``/``env_is_wrapped``/
``seed``/``set_options``/``render`` must answer as ``DummyVecEnv`` does.
"""

from __future__ import annotations

import functools
import operator
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import pytest
from envs_for_tests import env_fns, make_env, sample_value
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import ResizeObservation, TimeLimit, TransformObservation
from helpers import assert_tree_equal, descendants, wait_gone
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    VecEnv,
    VecFrameStack,
    VecMonitor,
    VecNormalize,
    VecTransposeImage,
)
from test_process_lifecycle import vizdoom_cwd

from vecfast import make_vec as vecfast_make_vec
from vecfast.wrappers.sb3 import SB3Bridge, SB3VecEnv, make_vec_env

pytestmark = pytest.mark.usefixtures("scratch_in_tmp_path")  # SB3 leaves SB3-<time> in the temp dir
SYSTEM_TEMP_DIR = tempfile.gettempdir()

NUM_ENVS = 5
STEPS = 300
CARTPOLE_LIMITS = (12, 500, 30, 500, 7)  # some envs are truncated long before CartPole falls


# ---------------------------------------------------------------------------- envs


class DictObservation(gym.ObservationWrapper):
    """An image env seen through a Dict observation: the image and a float summary of it."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        image = env.observation_space
        state = spaces.Box(0.0, 255.0, (image.shape[-1],), np.float32)
        self.observation_space = spaces.Dict({"image": image, "state": state})

    def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        return {"image": observation, "state": observation.mean(axis=(0, 1), dtype=np.float32)}


def make_dict_env(index: int) -> gym.Env:
    """A test env (rich infos, terminations, truncations) with Dict observations."""
    return DictObservation(make_env("box_u8_image", index))


def bridged(env_fn: Callable[[], gym.Env]) -> gym.Env:
    return SB3Bridge(env_fn())


def monitored(env_fn: Callable[[], gym.Env]) -> gym.Env:
    return Monitor(env_fn())


ENV_KINDS: dict[str, Callable[[], list[Callable[[], gym.Env]]]] = {
    "cartpole": lambda: [functools.partial(gym.make, "CartPole-v1", max_episode_steps=n) for n in CARTPOLE_LIMITS],
    "dict_obs": lambda: [functools.partial(make_dict_env, i) for i in range(NUM_ENVS)],
    "box": lambda: env_fns(NUM_ENVS, "box_f32", render_mode="rgb_array"),
}


def random_actions(space: spaces.Space, num_envs: int, rng: np.random.Generator) -> np.ndarray | list[Any]:
    """A batch of actions shaped as SB3 passes them: an array, or one action per env for Dict/Tuple spaces."""
    if isinstance(space, spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, num_envs)
    if isinstance(space, spaces.Box):
        return rng.uniform(space.low, space.high, (num_envs, *space.shape)).astype(space.dtype)
    rows = [sample_value(space, rng) for _ in range(num_envs)]
    return rows if isinstance(space, (spaces.Dict, spaces.Tuple)) else np.stack(rows)


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture
def make_adapter(make_async, make_sync) -> Callable[..., SB3VecEnv]:
    """``make_adapter(fns, vector="vecfast"|"sync", bridge=True, **vector_kwargs)``: SB3VecEnv
    over a vector env of these envs, closed after the test."""

    def make(fns: Sequence[Callable[[], gym.Env]], vector: str = "vecfast", bridge: bool = True, **kwargs: Any):
        if bridge:
            fns = [functools.partial(bridged, fn) for fn in fns]
        kwargs.setdefault("autoreset_mode", AutoresetMode.SAME_STEP)
        vector_env = make_async(fns, num_workers=2, **kwargs) if vector == "vecfast" else make_sync(fns, **kwargs)
        return SB3VecEnv(vector_env)

    return make


@pytest.fixture
def closing() -> Iterator[Callable[[VecEnv], VecEnv]]:
    """``closing(venv)`` closes ``venv`` after the test, passed or not."""
    opened: list[VecEnv] = []
    yield lambda venv: opened.append(venv) or venv
    for venv in opened:
        venv.close()


# ---------------------------------------------------------------------------- comparisons


def without_times(infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Infos without Monitor's wall-clock ``episode["t"]``, the one thing that differs run to run."""
    return [{**info, "episode": {**info["episode"], "t": 0.0}} if "episode" in info else info for info in infos]


def assert_vec_step_equal(actual: tuple, expected: tuple, what: str) -> None:
    obs, rewards, dones, infos = actual
    assert_tree_equal(obs, expected[0], f"{what}.obs")
    assert_tree_equal(rewards, expected[1], f"{what}.rewards")
    assert_tree_equal(dones, expected[2], f"{what}.dones")
    assert isinstance(infos, list) and len(infos) == len(expected[3])
    for i, (info, expected_info) in enumerate(zip(without_times(infos), without_times(expected[3]), strict=True)):
        assert_tree_equal(info, expected_info, f"{what}.infos[{i}]")


def run_lockstep(ours: VecEnv, reference: VecEnv, steps: int, seed: int) -> dict[str, int]:
    """Drive both VecEnvs with the same seeds and actions, comparing everything each step."""
    assert ours.seed(seed) == reference.seed(seed)
    assert_tree_equal(ours.reset(), reference.reset(), "reset")
    assert_tree_equal(ours.reset_infos, reference.reset_infos, "reset_infos")
    rng = np.random.default_rng(seed)
    seen = {"terminated": 0, "truncated": 0}
    for t in range(steps):
        actions = random_actions(reference.action_space, reference.num_envs, rng)
        expected = reference.step(actions.copy())
        assert_vec_step_equal(ours.step(actions.copy()), expected, f"step {t}")
        assert_tree_equal(ours.reset_infos, reference.reset_infos, f"step {t}.reset_infos")
        for info in expected[3]:
            if "terminal_observation" in info:
                seen["truncated" if info["TimeLimit.truncated"] else "terminated"] += 1
    return seen


# ---------------------------------------------------------------------------- (a) step outputs


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "vector, mode",
    [
        ("vecfast", AutoresetMode.SAME_STEP),
        ("vecfast", AutoresetMode.NEXT_STEP),
        ("vecfast", AutoresetMode.DISABLED),
        ("sync", AutoresetMode.SAME_STEP),
        ("sync", AutoresetMode.NEXT_STEP),
    ],
    ids=lambda v: v.value if isinstance(v, AutoresetMode) else v,
)
@pytest.mark.parametrize("kind", ENV_KINDS)
def test_steps_match_dummy_vec_env(make_adapter, kind, vector, mode):
    fns = ENV_KINDS[kind]()
    ours = make_adapter(fns, vector, autoreset_mode=mode)
    assert ours.observation_space == DummyVecEnv(fns).observation_space
    seen = run_lockstep(ours, DummyVecEnv(fns), STEPS, seed=7)
    assert seen["terminated"] > 5 and seen["truncated"] > 5, seen  # both endings were compared


@pytest.mark.timeout(60)
def test_make_vec_env_matches_sb3(closing, tmp_path):
    """Same envs as SB3's make_vec_env (Monitor, wrapper_class, seeds), same results and monitor files."""
    kwargs = {"n_envs": 4, "seed": 3, "wrapper_class": TimeLimit, "wrapper_kwargs": {"max_episode_steps": 25}}
    ours = closing(make_vec_env("CartPole-v1", monitor_dir=str(tmp_path / "ours"), **kwargs))
    reference = closing(sb3_make_vec_env("CartPole-v1", monitor_dir=str(tmp_path / "sb3"), **kwargs))
    assert isinstance(ours, SB3VecEnv) and ours.vector_env.autoreset_mode == AutoresetMode.SAME_STEP
    assert ours.get_attr("render_mode") == reference.get_attr("render_mode") == ["rgb_array"] * 4
    assert ours.env_is_wrapped(Monitor) == [True] * 4
    # The first reset uses make_vec_env's seeds: reset here, not in run_lockstep (which reseeds).
    assert_tree_equal(ours.reset(), reference.reset(), "first reset")
    rng = np.random.default_rng(0)
    episodes = 0
    for t in range(STEPS):
        actions = rng.integers(0, 2, 4)
        expected = reference.step(actions)
        assert_vec_step_equal(ours.step(actions), expected, f"step {t}")
        episodes += sum("episode" in info for info in expected[3])
    assert episodes > 20
    ours.close()  # flush the monitor files
    reference.close()
    for rank in range(4):
        ours_rows = (tmp_path / "ours" / f"{rank}.monitor.csv").read_text().splitlines()[2:]
        sb3_rows = (tmp_path / "sb3" / f"{rank}.monitor.csv").read_text().splitlines()[2:]
        assert [row.split(",")[:2] for row in ours_rows] == [row.split(",")[:2] for row in sb3_rows]  # r, l


@pytest.mark.timeout(30)
def test_make_vec_env_with_an_sb3_class_is_sb3s(closing):
    venv = closing(make_vec_env("CartPole-v1", n_envs=2, vec_env_cls=DummyVecEnv))
    assert type(venv) is DummyVecEnv


@pytest.mark.timeout(30)
def test_observations_are_copies_even_if_the_vector_env_reuses_its_buffer(make_adapter):
    """SB3 keeps the last observations while it steps again (rollout buffers, _last_obs)."""
    ours = make_adapter(ENV_KINDS["box"](), copy=False)
    first = ours.reset()
    kept = first.copy()
    ours.step(np.zeros((NUM_ENVS, 2), np.float32))
    assert_tree_equal(first, kept)


# ---------------------------------------------------------------------------- (b), (c) training


# rl-baselines3-zoo's PPO settings for CartPole-v1 (hyperparams/ppo.yml).
CARTPOLE_PPO = {
    "n_steps": 32,
    "batch_size": 256,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "n_epochs": 20,
    "ent_coef": 0.0,
    "learning_rate": LinearSchedule(1e-3, 0.0, 1.0),
    "clip_range": LinearSchedule(0.2, 0.0, 1.0),
}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ppo_learns_cartpole(closing):
    venv = closing(make_vec_env("CartPole-v1", n_envs=8, seed=0))
    model = PPO("MlpPolicy", venv, seed=0, device="cpu", **CARTPOLE_PPO)
    start = time.monotonic()
    model.learn(total_timesteps=50_000)  # rl-zoo's 100k; at 40k and 60k too it evaluates at 500
    print(f"PPO CartPole-v1, 50k steps through SB3VecEnv: {time.monotonic() - start:.1f} s")
    assert model.num_timesteps >= 50_000
    eval_env = Monitor(gym.make("CartPole-v1"))
    eval_env.reset(seed=12345)
    mean_return, _ = evaluate_policy(model, eval_env, n_eval_episodes=10)
    eval_env.close()
    assert mean_return >= 400, mean_return


def doom_screen(env: gym.Env) -> gym.Env:
    """VizDoom's Dict observation reduced to its screen, 60x80 (the game renders 120x160 gray)."""
    env = TransformObservation(env, operator.itemgetter("screen"), env.observation_space["screen"])
    return ResizeObservation(env, (60, 80))


DOOM_KWARGS = {"frame_skip": 4, "screen_resolution": "RES_160X120", "screen_format": "GRAY8"}


def vizdoom_games() -> list[psutil.Process]:
    return [p for p in descendants() if "vizdoom" in p.name()]


@pytest.mark.timeout(300)
def test_ppo_cnn_runs_on_vizdoom(closing, tmp_path, monkeypatch):
    import vizdoom.gymnasium_wrapper  # noqa: F401  (registers VizdoomBasic-v1)

    monkeypatch.chdir(vizdoom_cwd(tmp_path))
    venv = closing(make_vec_env("VizdoomBasic-v1", n_envs=4, seed=0, wrapper_class=doom_screen, env_kwargs=DOOM_KWARGS))
    assert venv.observation_space == spaces.Box(0, 255, (60, 80, 1), np.uint8)
    model = PPO("CnnPolicy", venv, n_steps=128, batch_size=128, n_epochs=2, seed=0, device="cpu")
    assert isinstance(model.get_env(), VecTransposeImage)  # SB3 wrapped the adapter for its CNN
    model.learn(total_timesteps=512)
    assert model.num_timesteps >= 512
    games = vizdoom_games()  # VizDoom starts a game at the first reset
    assert len(games) == 4
    # Episodes last at most 300 tics = 75 steps: every env finished some, and Monitor's
    # episode infos came through the adapter.
    assert len(model.ep_info_buffer) >= 4
    assert all(info["l"] <= 75 for info in model.ep_info_buffer)
    venv.close()
    assert wait_gone(games, timeout=10) == [], "VizDoom games outlived close()"


# ---------------------------------------------------------------------------- (d) composition


def vec_stack(venv: VecEnv) -> VecEnv:
    venv = VecMonitor(venv)
    venv = VecNormalize(venv, norm_obs_keys=["state"], gamma=0.9)
    venv = VecFrameStack(venv, n_stack=3)
    return VecTransposeImage(venv)


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore:Treating image space as channels-last")  # the test env's 6x5x3 images
def test_sb3_wrappers_compose_as_over_dummy_vec_env(make_adapter):
    fns = ENV_KINDS["dict_obs"]()
    ours = vec_stack(make_adapter(fns))
    reference = vec_stack(DummyVecEnv(fns))
    assert ours.observation_space == reference.observation_space
    assert ours.observation_space["image"].shape == (9, 6, 5)  # stacked, channel-first
    seen = run_lockstep(ours, reference, STEPS, seed=11)
    assert seen["terminated"] > 5 and seen["truncated"] > 5, seen
    normalize = ours.venv.venv
    assert_tree_equal(normalize.obs_rms["state"].mean, reference.venv.venv.obs_rms["state"].mean)
    assert_tree_equal(normalize.ret_rms.var, reference.venv.venv.ret_rms.var)


@pytest.mark.timeout(120)
def test_ppo_trains_through_wrappers(make_adapter):
    venv = VecFrameStack(VecNormalize(VecMonitor(make_adapter(ENV_KINDS["cartpole"]()))), n_stack=4)
    model = PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=640)
    assert model.num_timesteps >= 640 and len(model.ep_info_buffer) > 0


# ---------------------------------------------------------------------------- (e) per-env access


@pytest.mark.timeout(60)
@pytest.mark.parametrize("vector", ["vecfast", "sync"])
def test_env_access_matches_dummy_vec_env(make_adapter, vector):
    fns = ENV_KINDS["box"]()  # envs 2 has no TimeLimit; all render rgb_array
    ours = make_adapter(fns, vector)
    reference = DummyVecEnv(fns)
    both = (ours, reference)

    def same(method: str, *args: Any, **kwargs: Any) -> Any:
        results = [getattr(venv, method)(*args, **kwargs) for venv in both]
        assert_tree_equal(tuple(results[0]), tuple(results[1]), f"{method}{args}{kwargs}")
        return results[0]

    run_lockstep(ours, reference, 20, seed=5)
    for indices in (None, 3, [4, 0], [1, 1, 2], range(2)):
        same("get_attr", "step_count", indices=indices)
        same("env_method", "scaled_state", 3, indices=indices, offset=1)
    assert same("env_is_wrapped", TimeLimit) == [True, True, False, True, True]
    assert same("env_is_wrapped", Monitor, indices=[0]) == [False]
    assert ours.has_attr("scaled_state") and reference.has_attr("scaled_state")
    assert not ours.has_attr("no_such_thing") and not reference.has_attr("no_such_thing")

    # set_attr sets the outermost layer: TimeLimit-wrapped envs get a new attribute on the
    # wrapper (the env keeps its reward_scale); env 2 has no wrapper and its scale changes.
    for venv in both:
        venv.set_attr("reward_scale", 2.5, indices=[1, 2])
        venv.set_attr("label", "tagged", indices=[3])
    same("get_attr", "reward_scale")
    same("get_attr", "label", indices=[3])
    for venv in both:
        with pytest.raises(AttributeError):
            venv.get_attr("label")  # only env 3 has one
    run_lockstep(ours, reference, 30, seed=6)  # rewards reflect the new scales

    # Seeds and options apply at the next reset only, then are forgotten.
    seeds = same("seed", 42)
    assert seeds == list(range(42, 42 + NUM_ENVS))
    for options in ({"tag": "all"}, [{"tag": i} if i % 2 else {} for i in range(NUM_ENVS)]):
        for venv in both:
            venv.set_options(options)
        same("reset")
        assert_tree_equal(ours.reset_infos, reference.reset_infos, f"reset_infos with options {options}")
        assert any("tag" in info for info in ours.reset_infos)
        same("reset")  # no seeds, no options now: the envs' own RNGs continue
        assert not any("tag" in info for info in ours.reset_infos)

    assert ours.render_mode == reference.render_mode == "rgb_array"
    same("get_images")
    same("render")


@pytest.mark.timeout(60)
def test_without_bridges(make_adapter):
    """A vector env whose envs are not wrapped in SB3Bridge: what needs one says so."""
    ours = make_adapter(ENV_KINDS["box"](), bridge=False)
    ours.reset()
    assert ours.get_attr("index", indices=[3, 1]) == [3, 1]
    assert len(ours.env_method("scaled_state", 2)) == NUM_ENVS
    ours.set_attr("reward_scale", 0.0)
    assert ours.get_attr("reward_scale") == [0.0] * NUM_ENVS
    with pytest.raises(NotImplementedError, match="SB3Bridge"):
        ours.env_method("scaled_state", 2, indices=[1])
    with pytest.raises(NotImplementedError, match="SB3Bridge"):
        ours.set_attr("reward_scale", 1.0, indices=[1])
    with pytest.raises(AttributeError):
        ours.get_attr("no_such_thing")
    vec_monitor = VecMonitor(ours)
    vec_monitor.reset()
    for _ in range(40):
        vec_monitor.step(np.zeros((NUM_ENVS, 2), np.float32))
    assert vec_monitor.episode_count > 0


@pytest.mark.timeout(60)
def test_env_is_wrapped_without_bridges(make_adapter):
    """Asked through the workers, per env, as DummyVecEnv answers: VecMonitor warns that it
    overwrites Monitor's statistics, as it does over SB3's VecEnvs."""
    fns = [functools.partial(monitored, fn) if i % 2 == 0 else fn for i, fn in enumerate(ENV_KINDS["box"]())]
    ours = make_adapter(fns, bridge=False)
    reference = DummyVecEnv(fns)
    for wrapper_class in (Monitor, TimeLimit, gym.Wrapper, gym.ObservationWrapper, SB3Bridge):
        for indices in (None, [3, -1], 2):
            expected = reference.env_is_wrapped(wrapper_class, indices)
            assert ours.env_is_wrapped(wrapper_class, indices) == expected, (wrapper_class, indices)
    assert ours.env_is_wrapped(Monitor) == [True, False, True, False, True]
    with pytest.warns(UserWarning, match="already wrapped with a `Monitor`"):
        VecMonitor(ours)


@pytest.mark.timeout(30)
def test_some_envs_bridged_is_refused(make_async):
    fns = ENV_KINDS["box"]()
    fns[0] = functools.partial(bridged, fns[0])
    with pytest.raises(ValueError, match="only some envs"):
        SB3VecEnv(make_async(fns, num_workers=2))


@pytest.mark.timeout(60)
def test_over_vecfast_make_vec(closing):
    """vecfast.make_vec's vector env (no bridges) works with SB3 as it is."""
    venv = closing(
        SB3VecEnv(
            vecfast_make_vec(
                "CartPole-v1",
                4,
                vectorization_mode="shared_memory",  # CartPole's own vector_entry_point would win otherwise
                vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
            )
        )
    )
    model = PPO("MlpPolicy", VecMonitor(venv), n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    scratch = set(Path(SYSTEM_TEMP_DIR).glob("SB3-*"))
    model.learn(total_timesteps=512)
    assert len(model.ep_info_buffer) > 0
    assert set(Path(SYSTEM_TEMP_DIR).glob("SB3-*")) == scratch  # SB3's logger folder went to the test's tmp_path
