"""What ``pip install vecfast`` and each extra install, checked against ``pyproject.toml`` and by running the
core with every optional module missing (docs/getting-started.md, "What each extra installs")."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import cv2
import gymnasium as gym
import numpy as np
import pytest
import tomllib

from vecfast.envs import area_resize
from vecfast.envs.doom import downscale
from vecfast.envs.nav.scenes import largest_region
from vecfast.extras import EXTRA_OF

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]
NOT_USER_EXTRAS = {"bench", "dev", "docs"}  # the peers benchmarks measure against; the test tools; the docs site


def name_of(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def installs(extra: str) -> set[str]:
    """The distributions ``vecfast[extra]`` requires, with the extras it names expanded."""
    names = set()
    for requirement in EXTRAS[extra]:
        nested = re.fullmatch(r"vecfast\[(.*)\]", requirement)
        names |= set().union(*map(installs, nested.group(1).split(","))) if nested else {name_of(requirement)}
    return names


def test_the_core_is_the_vector_env_and_nothing_heavy():
    assert {name_of(r) for r in PROJECT["dependencies"]} == {"gymnasium", "numpy", "cloudpickle", "psutil"}


def test_all_is_every_user_extra_and_no_user_extra_installs_opencv():
    """``opencv-python`` and ``opencv-python-headless`` both write ``cv2/``: an extra that forced one would break
    the other (``stable-baselines3[extra]`` and ``gymnasium[other]`` install ``opencv-python``)."""
    user_extras = set(EXTRAS) - NOT_USER_EXTRAS - {"all"}
    assert installs("all") == set().union(*map(installs, user_extras))
    assert not [name for name in installs("all") if name.startswith("opencv")]
    assert not installs("all") & installs("bench") - installs("sb3")  # no benchmark peers in users' envs


def test_each_optional_module_comes_with_the_extra_its_error_names():
    providers = importlib.metadata.packages_distributions()
    for module, extra in EXTRA_OF.items():
        distributions = {name_of(d) for d in providers[module]}
        assert distributions & installs(extra), f"{module} is not installed by vecfast[{extra}]"


def test_the_core_runs_with_every_optional_module_missing_and_says_which_extra_brings_each():
    """As on a machine with ``pip install vecfast`` only: the vector env, its wrappers and ``make_vec`` work; each
    optional part raises an ImportError naming its extra (the OpenCV wrappers: gymnasium's DependencyNotInstalled)."""
    hidden = [*EXTRA_OF, "cv2"]
    code = textwrap.dedent(
        f"""
        import sys
        for name in {hidden!r}:
            sys.modules[name] = None  # importing it raises ModuleNotFoundError, as where it is not installed
        import gymnasium as gym
        import numpy as np
        import vecfast
        from vecfast.vector import AsyncSharedMemVectorEnv
        from vecfast.wrappers import GrayscaleObservation, RecordEpisodeStatistics, ResizeObservation

        envs = RecordEpisodeStatistics(vecfast.make_vec("CartPole-v1", 4, "shared_memory", {{"num_workers": 2}}))
        envs.reset(seed=0)
        for _ in range(50):
            envs.step(envs.action_space.sample())
        envs.close()
        def fails(what, thunk):
            try:
                thunk()
            except Exception as error:
                print(what, type(error).__name__, "|", error)
        class Screen(gym.Env):
            observation_space = gym.spaces.Box(0, 255, (32, 48, 3), np.uint8)
            action_space = gym.spaces.Discrete(2)
            def reset(self, *, seed=None, options=None):
                return self.observation_space.sample(), {{}}
        rgb = AsyncSharedMemVectorEnv([Screen] * 2, num_workers=1)
        GrayscaleObservation(rgb, formula="gymnasium").reset(seed=0)
        fails("resize", lambda: ResizeObservation(rgb, (84, 84)))
        fails("train", lambda: vecfast.train)
        fails("doom", lambda: gym.make("vecfast/DoomBasic-v0"))
        fails("sb3", lambda: __import__("vecfast.wrappers.sb3"))
        rgb.close()
        from vecfast.cli import main
        print("cli exit", main(["train", "CartPole-v1", "--total-env-steps", "64"]))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert lines["resize"].startswith("DependencyNotInstalled | ResizeObservation needs OpenCV: pip install opencv")
    assert lines["train"] == (
        "MissingExtraError | vecfast's train needs torch, which vecfast's 'train' extra installs: "
        "pip install 'vecfast[train]' (on a CPU-only machine, pip install torch==2.13.0 first: an unpinned torch "
        "pulls a CUDA build)"
    )
    assert (
        lines["doom"].startswith("MissingExtraError | vecfast's Doom envs needs vizdoom") and "[doom]" in lines["doom"]
    )
    assert lines["sb3"].startswith("MissingExtraError | vecfast.wrappers.sb3 needs stable_baselines3")
    assert lines["cli"] == "exit 2"
    assert "pip install 'vecfast[train]'" in out.stderr and len(out.stderr.strip().splitlines()) == 1


LEAN = f"import sys\nfor name in {[*EXTRA_OF, 'cv2']!r}:\n    sys.modules[name] = None\nfrom vecfast.cli import main\n"


def lean_cli(*argv: str) -> subprocess.CompletedProcess:
    """``vecfast ARGV`` with every optional module missing, as after ``pip install vecfast``."""
    code = f"{LEAN}sys.exit(main({list(argv)!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_lean_install_benchmarks_vecfast_against_gymnasium_in_plain_text():
    """The extras table's promise: ``vecfast bench --only vecfast,gymnasium`` without rich (the train extra)."""
    run = lean_cli("bench", "CartPole-v1", "--num-envs", "4", "--seconds", "0.3", "--warmup", "0", "--only",
                   "vecfast,gymnasium")  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "CartPole-v1: 4 envs, 2 workers, 0.3 s each"
    assert lines[1].split() == ["backend", "steps/s", "vs", "limit", "vs", "async", "vs", "sync"]
    assert [line[:18] for line in lines[2:5]] == ["gym SyncVectorEnv ", "gym AsyncVectorEnv", "vecfast step()    "]
    assert "steps/s" in run.stderr and "\x1b" not in run.stdout + run.stderr  # progress as plain lines


@pytest.mark.parametrize(
    "argv,extras",
    [
        (["train", "vecfast/DoomBasic-v0"], "train,doom"),
        (["train", "ALE/Pong-v5", "--algo", "ppo"], "train,atari"),
        (["train", "pettingzoo.classic.connect_four_v3"], "train,pettingzoo"),
        (["tune", "vecfast/DoomBasic-v0"], "train,doom"),
        (["bench", "vecfast/DoomBasic-v0"], "doom"),
        (["train", "vecfast/DoomBasic-v0", "--ray_address", "local"], "train,doom,ray"),
    ],
)
def test_a_command_names_every_extra_it_needs_at_once(argv: list[str], extras: str):
    run = lean_cli(*argv)
    assert run.returncode == 2
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"vecfast {argv[0]}: error: vecfast {argv[0]} needs ")
    assert f"pip install 'vecfast[{extras}]'" in line


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_lean_venv_installs_the_core_and_runs_the_vector_env(tmp_path):
    """A real ``pip install vecfast`` into an empty venv: what it holds, and the vector env working there."""
    venv = tmp_path / "lean"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", str(ROOT)], capture_output=True, text=True, timeout=480
    )
    assert pip.returncode == 0, pip.stderr
    listed = subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    )
    installed = {name_of(line) for line in listed.stdout.splitlines()}
    assert not installed & {"torch", "rich", "tensorboard", "tensorboardx", "opencv-python-headless", "vizdoom"}
    code = "import vecfast; e = vecfast.make_vec('CartPole-v1', 4, 'shared_memory'); e.reset(seed=0); e.close()"
    run = subprocess.run([venv / "bin" / "python", "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    bench = [venv / "bin" / "vecfast", "bench", "CartPole-v1", "-n", "4", "--seconds", "0.3"]
    bench += ["--only", "vecfast,gymnasium"]
    run = subprocess.run(bench, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "vecfast step()" in run.stdout, run.stderr


def test_doom_screens_downscaled_without_opencv_have_opencvs_pixels(monkeypatch):
    """The numpy fallback (where no OpenCV is installed) against ``cv2.resize(INTER_AREA)``, on real frames."""
    env = gym.make("vecfast/DoomBasic-v0", render_mode="rgb_array")
    env.reset(seed=0)
    frames = []
    for _ in range(40):
        env.step(env.action_space.sample())
        frames.append(env.render())
    env.close()
    with_opencv = downscale.Downscale((128, 72), source=(160, 120))
    expected = [with_opencv(frame) for frame in frames]
    monkeypatch.setattr(area_resize, "cv2", None)
    with pytest.warns(UserWarning, match="without OpenCV, about 10x slower: pip install opencv-python-headless"):
        without = downscale.Downscale((128, 72), source=(160, 120))
    for frame, pixels in zip(frames, expected, strict=True):
        np.testing.assert_array_equal(without(frame), pixels)
    for resolution in [(84, 84), (160, 120), (64, 48), (100, 30)]:
        with warnings.catch_warnings(action="ignore"):
            without = downscale.Downscale(resolution, source=(160, 120))
        expected = cv2.resize(frames[-1], resolution, interpolation=cv2.INTER_AREA).transpose(2, 0, 1)
        assert np.abs(without(frames[-1]).astype(int) - expected).max() <= 1  # upscaling rounds differently


def test_navs_largest_region_is_opencvs_largest_4_connected_component():
    rng = np.random.default_rng(0)
    for _ in range(500):
        free = rng.random(rng.integers(1, 40, 2)) < rng.uniform(0.2, 0.9)
        count, labels, stats, _ = cv2.connectedComponentsWithStats(free.astype(np.uint8), connectivity=4)
        expected = labels == 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA])) if count > 1 else np.zeros_like(free)
        np.testing.assert_array_equal(largest_region(free), expected)
