"""``train()``: env arguments, the run directory (config, metrics, atomic checkpoints), the policy, stopping."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from helpers import descendants, wait_gone
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import vecfast
from vecfast.trainers import TrainResult, load_policy, train
from vecfast.trainers.algorithm.schedules import lr_scale
from vecfast.trainers.registry import resolve
from vecfast.trainers.run.defaults import ConfigLayers
from vecfast.trainers.run.run_dir import RunDir, last_checkpoints, load_checkpoint

FAST = {"num_workers": 1, "num_envs_per_worker": 4, "rollout": 16, "batch_size": 64}


def check_run_dir(result: TrainResult, algo: str, total: int) -> list[dict]:
    config = json.loads((result.run_dir / "config.json").read_text())
    recipe = resolve(algo)
    assert (config["algo"], config["scheme"]) == (recipe.algo, recipe.scheme) and config["total_env_steps"] == total
    assert config["config"]["rollout"] == 16 and config["config"]["use_rnn"] is False  # vector-obs family defaults
    lines = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    lagged = recipe.scheme == "async"  # only there does an older policy act
    assert lines and all("env_frames" in m and ("policy_lag_avg" in m) == lagged for m in lines)
    steps = [m["env_steps"] for m in lines]
    assert steps == sorted(steps) and steps[-1] >= total
    assert result.stats["env_steps"] == steps[-1] == result.stats["env_frames"]  # CartPole has no frame skip
    assert set(result.stats["policy_lag"]) == {"min", "avg", "max"}
    assert np.isfinite(result.stats["mean_episode_return"]) and result.stats["fps"] > 0
    return lines


@pytest.mark.parametrize("algo", ["appo", "ppo"])
def test_train_by_env_id_writes_a_complete_run(algo: str, tmp_path: Path) -> None:
    result = train("CartPole-v1", algo=algo, total_env_steps=3000, run_dir=tmp_path / "run", seed=0, **FAST)
    check_run_dir(result, algo, 3000)
    checkpoints = last_checkpoints(result.run_dir)
    newest = load_checkpoint(result.run_dir)["env_steps"]  # APPO's sampler may run ahead of the last iteration
    assert checkpoints and checkpoints[0].name == f"last_{newest:012d}.pt" and newest >= result.stats["env_steps"]
    assert len(checkpoints) <= 2
    # the saved policy acts exactly as the returned one
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    saved = load_policy(result.run_dir, which="last")
    np.testing.assert_array_equal(saved.act(obs, deterministic=True), result.policy.act(obs, deterministic=True))
    assert result.policy.act(obs).shape == (5,)


def test_train_leaves_a_given_env_open_and_takes_factories(make_async: Callable, tmp_path: Path) -> None:
    env = make_async([lambda: gym.make("CartPole-v1")] * 4, num_workers=1, batch_size=2)
    result = train(env, total_env_steps=1000, run_dir=tmp_path / "given", **FAST)
    assert result.stats["env_steps"] >= 1000
    obs, _ = env.reset(seed=1)  # still usable
    assert obs.shape == (4, 4)
    made = []

    def factory() -> gym.vector.VectorEnv:
        made.append(gym.make_vec("CartPole-v1", 4, vectorization_mode="sync"))
        return made[-1]

    result = train(factory, algo="ppo", total_env_steps=1000, run_dir=tmp_path / "factory", **FAST)
    assert result.stats["env_steps"] >= 1000 and made[0].closed
    with pytest.raises(TypeError, match="unknown config keys"):
        train(env, total_env_steps=10, run_dir=tmp_path / "bad", num_env=3)
    for making in ({"num_envs": 4}, {"env_kwargs": {"max_episode_steps": 9}}):  # for the env vecfast makes
        with pytest.raises(TypeError, match="for an env id"):
            train(env, total_env_steps=10, run_dir=tmp_path / "bad", **making)


def test_a_truncated_newest_checkpoint_falls_back_to_the_previous(tmp_path: Path) -> None:
    run = RunDir(tmp_path, keep=3)
    run.save({"env_steps": 100})
    newest = run.save({"env_steps": 200})
    run.close()
    newest.write_bytes(newest.read_bytes()[:20])  # as if killed mid-write without the atomic rename
    with pytest.warns(RuntimeWarning, match="moved to last_000000000200.pt.corrupt"):
        assert load_checkpoint(tmp_path)["env_steps"] == 100
    assert not list(tmp_path.glob("checkpoints/.*.tmp"))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_training_saves_and_cleans_up(signum: int, tmp_path: Path) -> None:
    script = (
        "import vecfast.trainers as t\n"
        f"r = t.train('CartPole-v1', total_env_steps=10**9, run_dir={str(tmp_path)!r}, num_workers=2,"
        " num_envs_per_worker=4, rollout=16, batch_size=64, save_every_sec=0)\n"  # a checkpoint per iteration
        "print('STOPPED', r.stats['interrupted'], r.stats['stopped_by'], r.stats['env_steps'], flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        metrics = tmp_path / "metrics.jsonl"
        deadline = time.monotonic() + 60
        while not (metrics.exists() and metrics.stat().st_size > 0) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert metrics.exists(), "training did not start"
        children = descendants(proc.pid)
        assert children, "no env workers"
        sent = time.monotonic()
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=30)
        stop_seconds = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and f"STOPPED True {signal.Signals(signum).name}" in out, out
    assert stop_seconds < 10
    steps = int(out.split()[-1])
    assert load_checkpoint(tmp_path)["metrics"]["env_steps"] == steps
    assert not wait_gone(children, timeout=5), "env workers outlived the run"
    assert os.path.exists(tmp_path / "config.json")
    assert not list(tmp_path.glob("checkpoints/.*")), "a checkpoint write was left half done"


@pytest.mark.parametrize("algo", ["appo", "ppo"])
def test_resume_continues_counters_optimizer_and_normalisation(algo: str, tmp_path: Path) -> None:
    first = train("CartPole-v1", algo=algo, total_env_steps=1500, run_dir=tmp_path, seed=0, **FAST)
    saved = load_checkpoint(tmp_path)
    assert saved["learner"]["version"] == first.stats["learner_steps"]
    with pytest.raises(ValueError, match="trained with algo"):
        train("CartPole-v1", algo="ppo" if algo == "appo" else "appo", run_dir=tmp_path, resume=True)
    second = train("CartPole-v1", algo=algo, total_env_steps=3000, run_dir=tmp_path, resume=True)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    resumed = [m for m in lines if m["learner_steps"] <= first.stats["learner_steps"]]
    after = lines[len(resumed)]
    per_iteration = lines[0]["learner_steps"]
    assert after["learner_steps"] == first.stats["learner_steps"] + per_iteration  # the version counter continued
    assert after["env_steps"] > saved["env_steps"]  # so did the env steps
    # and the episodes counter (from where it was: APPO's first report after the resume may come before an episode ends)
    assert after["episodes"] >= saved["metrics"]["episodes"]
    assert second.stats["episodes"] == lines[-1]["episodes"] > first.stats["episodes"]
    # every checkpoint is named by the env steps reported with it (the async sampler goes on meanwhile)
    assert load_checkpoint(tmp_path)["env_steps"] == second.stats["env_steps"] == lines[-1]["env_steps"]
    assert saved["env_steps"] == first.stats["env_steps"]
    assert second.stats["env_steps"] >= 3000
    assert json.loads((tmp_path / "config.json").read_text())["config"]["rollout"] == FAST["rollout"]
    # the optimiser's state came back: Adam's step count continued
    final = load_checkpoint(tmp_path)
    adam_steps = [s["step"] for s in final["learner"]["optimizer"]["state"].values()]
    assert all(int(step) == second.stats["learner_steps"] for step in adam_steps)
    assert final["best_return"] >= saved["best_return"] > 0  # the best so far carried over
    norm = "encoders.obs.norm.count"
    assert final["model"][norm] > saved["model"][norm]  # normalisation statistics kept accumulating


@pytest.mark.parametrize("algo", ["appo", "ppo"])
def test_a_resumed_run_reports_the_episodes_before_it_until_new_ones_replace_them(algo: str, tmp_path: Path) -> None:
    """A resumed run's window of episodes started empty: its first records had no mean return, then the mean of the
    first few episodes after the resume, and ``best.pt`` could be taken on one lucky episode. MountainCar's
    episodes (200 steps, -200 without reaching the flag) end at 400 env steps here, none in the resumed iteration."""
    settings = {"num_workers": 1, "num_envs_per_worker": 2, "rollout": 32, "batch_size": 64}
    train("MountainCar-v0", algo=algo, total_env_steps=448, run_dir=tmp_path, seed=0, **settings)
    saved = load_checkpoint(tmp_path)["metrics"]
    assert saved["episodes"] >= 1 and saved["mean_episode_return"] == -200.0  # (APPO may save before the second ends)
    train("MountainCar-v0", algo=algo, total_env_steps=saved["env_steps"] + 64, run_dir=tmp_path, resume=True)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    after = next(m for m in lines if m["env_steps"] > saved["env_steps"])
    assert after.get("mean_episode_return") == -200.0 and after.get("mean_episode_length") == 200.0
    assert after["episodes"] == saved["episodes"]  # counted once: the loop carries the count


def test_env_kwargs_and_num_envs_make_the_env_and_a_resume_makes_it_again(tmp_path: Path) -> None:
    """train(env_id, env_kwargs=...) makes the env with them, stores them, and resume and evaluate make the same
    env; num_envs is the envs in all, split over the workers."""
    short = {"max_episode_steps": 6}  # no pole falls that soon
    first = train("CartPole-v1", algo="ppo", total_env_steps=512, run_dir=tmp_path, env_kwargs=short, num_envs=4,
                  rollout=16, batch_size=64, seed=0)  # fmt: skip
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["env_kwargs"] == short and config["num_envs"] == 4
    assert (config["config"]["num_workers"], config["config"]["num_envs_per_worker"]) == (2, 2)
    assert load_checkpoint(tmp_path)["env_kwargs"] == short
    train("CartPole-v1", algo="ppo", total_env_steps=1024, run_dir=tmp_path, resume=True)
    lengths = [json.loads(line)["max_episode_return"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(lengths) == 16 and max(lengths) == 6  # CartPole's reward is 1 per step: all cut at 6
    assert vecfast.evaluate(tmp_path, episodes=3).lengths == (6, 6, 6)  # cut at 6 again
    longer = vecfast.evaluate(tmp_path, episodes=1, env_kwargs={"max_episode_steps": 30})
    assert longer.lengths[0] > 6
    assert first.stats["env_steps"] == 512
    with pytest.raises(ValueError, match="num_envs=5 does not split evenly over num_workers=2"):
        train("CartPole-v1", algo="ppo", run_dir=tmp_path / "odd", num_envs=5)
    with pytest.raises(TypeError, match="env_kwargs max_episode_steps=<object"):
        train("CartPole-v1", algo="ppo", run_dir=tmp_path / "odd", env_kwargs={"max_episode_steps": object()})
    assert not (tmp_path / "odd").exists()


def test_a_run_that_failed_before_its_first_iteration_leaves_a_directory_a_new_run_takes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="device='cuda' but torch sees no CUDA GPU"):
        train("CartPole-v1", algo="ppo", run_dir=tmp_path / "cuda", device="cuda", **FAST)
    assert not (tmp_path / "cuda").exists()  # checked before anything was made
    with pytest.raises(ValueError, match="batch_size=1024 must divide it"):  # the scheme's own check, later
        train("CartPole-v1", algo="ppo", run_dir=tmp_path / "run", **{**FAST, "batch_size": 1024})
    assert (tmp_path / "run" / "config.json").exists()
    result = train("CartPole-v1", algo="ppo", total_env_steps=128, run_dir=tmp_path / "run", **FAST)
    assert result.stats["env_steps"] == 128


def tensorboard_scalars(run_dir: Path) -> dict[str, list]:
    events = EventAccumulator(str(run_dir))
    events.Reload()
    return {tag: events.Scalars(tag) for tag in events.Tags()["scalars"]}


def test_tensorboard_events_hold_the_metrics_and_a_resume_continues_them(tmp_path: Path) -> None:
    train("CartPole-v1", algo="ppo", total_env_steps=1024, run_dir=tmp_path, seed=0, save_every_sec=0, **FAST)
    events = tensorboard_scalars(tmp_path)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    logged = {k for m in lines for k, v in m.items() if k != "env_steps" and isinstance(v, (int, float))}
    assert set(events) == logged and "policy_loss" in logged and "mean_episode_return" in logged
    for key in logged:  # the newest point of every scalar is the JSONL's newest value, at its env steps
        newest = next(m for m in reversed(lines) if key in m)
        assert events[key][-1].step == newest["env_steps"]
        assert events[key][-1].value == pytest.approx(newest[key], rel=1e-6)
    assert [e.step for e in events["learner_steps"]] == [m["env_steps"] for m in lines]
    # resume from the checkpoint before the newest: TensorBoard drops what was logged after it
    checkpoints = sorted((tmp_path / "checkpoints").glob("last_*.pt"))
    assert len(checkpoints) == 2
    checkpoints[-1].unlink()
    train("CartPole-v1", algo="ppo", total_env_steps=2048, run_dir=tmp_path, resume=True)
    events = tensorboard_scalars(tmp_path)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [e.step for e in events["learner_steps"]]
    assert steps == sorted({m["env_steps"] for m in lines}) and steps[-1] >= 2048  # each step once, in order
    by_step = {m["env_steps"]: m for m in lines}  # the resumed session's line where both logged a step
    times = [by_step[s]["time"] for s in steps]  # "time" restarts with the session: it tells them apart
    assert [e.value for e in events["time"]] == pytest.approx(times, rel=1e-6)
    assert events["policy_loss"][-1].value == pytest.approx(lines[-1]["policy_loss"], rel=1e-6)


def test_an_env_familys_defaults_sit_above_a_schemes() -> None:
    """Sync PPO's scheme defaults are CleanRL's for pixels (lr 3e-4); a vector-obs env takes its family's 1e-3
    under every scheme (CartPole under sync PPO ended seeds at 403-500 with 3e-4), an algorithm's or the caller's
    own settings still win, and pixel envs keep the scheme's."""
    vector, pixels = spaces.Box(-1, 1, (4,), np.float32), spaces.Box(0, 255, (64, 64, 3), np.uint8)
    for algo in ("ppo", "ddppo", "appo"):
        assert ConfigLayers(resolve(algo)).config(vector).learning_rate == 1e-3
        assert ConfigLayers(resolve(algo), None, user={"learning_rate": 5e-4}).config(vector).learning_rate == 5e-4
    assert ConfigLayers(resolve("ppo")).config(pixels).learning_rate == 3e-4
    assert ConfigLayers(resolve("ddppo")).config(pixels).num_epochs == 4


def test_a_vector_env_under_a_distributed_scheme_scales_its_learning_rate_with_the_ranks() -> None:
    """DD-PPO's ranks average their minibatches into one gradient step, so N ranks take 1/N of one rank's
    steps per env step at the same rate: CartPole DD-PPO ended 2 of 10 seeds below 475 until the rate was
    scaled by sqrt(ranks) for vector envs. One rank, the other schemes, pixels and the caller are unchanged."""
    vector, pixels = spaces.Box(-1, 1, (4,), np.float32), spaces.Box(0, 255, (64, 64, 3), np.uint8)
    ddppo = ConfigLayers(resolve("ddppo")).config(vector)
    assert ddppo.lr_scaling == "sqrt"
    assert lr_scale(ddppo, world_size=2) == pytest.approx(2**0.5) and lr_scale(ddppo, world_size=1) == 1.0
    for algo in ("ppo", "appo"):
        assert ConfigLayers(resolve(algo)).config(vector).lr_scaling == "none"
    assert ConfigLayers(resolve("ddppo")).config(pixels).lr_scaling == "none"
    assert ConfigLayers(resolve("ddppo"), None, user={"lr_scaling": "none"}).config(vector).lr_scaling == "none"
