"""Checkpoints users can trust: loading runs no code, the newest one by default, a run directory per run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from vecfast.trainers import TrainResult, load_policy, train
from vecfast.trainers.run.run_dir import (
    RunDir,
    UnsafeCheckpointError,
    convert_legacy_checkpoint,
    default_run_dir,
    last_checkpoints,
    load_checkpoint,
    space_from_data,
    space_to_data,
)
from vecfast.trainers.tools.enjoy import enjoy

FAST = {"num_workers": 1, "num_envs_per_worker": 4, "rollout": 16, "batch_size": 64}


class Payload:
    """Unpickling it creates ``path``: the proof that loading ran code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return open, (str(self.path), "w")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    """A short PPO run whose in-loop best.pt (its first) is older than its final policy."""
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    return train("CartPole-v1", algo="ppo", total_env_steps=4096, run_dir=run_dir, seed=0, **FAST)


def test_a_crafted_checkpoint_is_refused_without_running_its_code(tmp_path: Path) -> None:
    proof = tmp_path / "code_ran"
    run = RunDir(tmp_path / "run")
    run.write_config({"algo": "ppo", "env": "CartPole-v1"})
    run.close()
    for name in ("last_000000000100.pt", "best.pt"):
        torch.save({"env_steps": 100, "algo": "ppo", "payload": Payload(proof)}, run.checkpoints / name)
    loaders = {
        "load_policy last": lambda: load_policy(run.path),
        "load_policy best": lambda: load_policy(run.path, which="best"),
        "enjoy": lambda: enjoy(run.path, episodes=1, which="best"),
        "load_policy file": lambda: load_policy(run.checkpoints / "last_000000000100.pt"),
        "resume": lambda: train("CartPole-v1", algo="ppo", run_dir=run.path, resume=True, **FAST),
    }
    for name, load in loaders.items():
        with pytest.raises(UnsafeCheckpointError, match="not loaded.*convert_legacy_checkpoint"):
            load()
        assert not proof.exists(), f"{name} ran the checkpoint's code"
    assert len(list(run.checkpoints.glob("*.pt"))) == 2  # refused, not moved aside as corrupt


def test_an_old_format_checkpoint_converts_on_request(trained: TrainResult, tmp_path: Path) -> None:
    run_dir = tmp_path / "old"
    (run_dir / "checkpoints").mkdir(parents=True)
    state = load_checkpoint(trained.run_dir)
    legacy = run_dir / "checkpoints" / f"last_{state['env_steps']:012d}.pt"
    # the previous format: gymnasium spaces pickled, numpy numbers among the metrics
    old = {**state, "observation_space": space_from_data(state["observation_space"])}
    old.update(action_space=space_from_data(state["action_space"]), best_return=np.float64(state["best_return"]))
    old["action_space"].seed(0)  # a space that sampled pickles its random generator
    old["action_space"].sample()
    old["metrics"] = {**state["metrics"], "mean_episode_return": np.float64(1.0)}
    torch.save(old, legacy)
    with pytest.raises(UnsafeCheckpointError, match="older vecfast"):
        load_policy(run_dir)
    convert_legacy_checkpoint(legacy)
    for key, value in load_policy(run_dir).state_dict().items():
        torch.testing.assert_close(value, trained.policy.state_dict()[key])


def test_converting_a_crafted_checkpoint_runs_no_code(tmp_path: Path) -> None:
    """Old behaviour: convert_legacy_checkpoint unpickled with weights_only=False and ran the payload."""
    proof = tmp_path / "code_ran"
    crafted = tmp_path / "last_000000000100.pt"
    torch.save({"env_steps": 100, "observation_space": spaces.Discrete(2), "payload": Payload(proof)}, crafted)
    with pytest.raises(UnsafeCheckpointError):
        convert_legacy_checkpoint(crafted)
    assert not proof.exists()


@pytest.mark.parametrize(
    "space",
    [
        spaces.Box(-np.inf, np.inf, (4,), np.float32),
        spaces.Box(0, 255, (84, 84, 3), np.uint8),
        spaces.Box(np.array([-1.0, 0.0]), np.array([1.0, 2.5]), dtype=np.float64),
        spaces.Discrete(5, start=-2),
        spaces.MultiDiscrete([3, 4], start=[0, 1], dtype=np.int32),
        spaces.MultiBinary([2, 3]),
        spaces.Dict({"image": spaces.Box(0, 255, (8, 8, 3), np.uint8), "pos": spaces.Tuple([spaces.Discrete(3)])}),
    ],
    ids=lambda s: type(s).__name__,
)
def test_spaces_go_through_plain_data_and_weights_only_loading(space: spaces.Space, tmp_path: Path) -> None:
    torch.save({"space": space_to_data(space)}, tmp_path / "space.pt")
    data = torch.load(tmp_path / "space.pt", weights_only=True)["space"]
    assert json.loads(json.dumps(data)) == data
    assert space_from_data(data) == space


def test_a_run_loads_its_newest_checkpoint_and_its_final_save_updates_best(trained: TrainResult) -> None:
    for key, value in load_policy(trained.run_dir).state_dict().items():
        torch.testing.assert_close(value, trained.policy.state_dict()[key])  # the final policy, not best.pt
    newest = last_checkpoints(trained.run_dir)[0]
    for key, value in load_policy(newest).state_dict().items():  # one checkpoint file, by its path
        torch.testing.assert_close(value, trained.policy.state_dict()[key])
    best = load_checkpoint(trained.run_dir, "best")
    assert best["best_return"] >= trained.stats["mean_episode_return"]  # the final policy, if better, is best.pt
    assert best["best_return"] == best["metrics"]["mean_episode_return"]


def test_checkpoint_names_match_their_env_steps(tmp_path: Path) -> None:
    train(
        "CartPole-v1",
        algo="appo",
        total_env_steps=3000,
        run_dir=tmp_path,
        save_every_sec=0,
        keep_checkpoints=10,
        **FAST,
    )
    checkpoints = last_checkpoints(tmp_path)
    assert len(checkpoints) > 2
    for path in checkpoints:
        assert path.name == f"last_{torch.load(path, weights_only=True)['env_steps']:012d}.pt"


def test_corrupt_checkpoints_are_moved_aside_and_rotation_keeps_the_last_good_one(tmp_path: Path) -> None:
    run = RunDir(tmp_path, keep=1)
    (run.checkpoints / "last_000000000300.pt").write_bytes(b"not a checkpoint")  # newer than what follows
    run.save({"env_steps": 100})
    run.save({"env_steps": 200})
    run.close()
    assert [p.name for p in last_checkpoints(tmp_path)] == ["last_000000000300.pt", "last_000000000200.pt"]
    with pytest.warns(RuntimeWarning, match="unreadable checkpoint .*last_000000000300.pt"):
        assert load_checkpoint(tmp_path)["env_steps"] == 200
    assert (run.checkpoints / "last_000000000300.pt.corrupt").exists()
    assert [p.name for p in last_checkpoints(tmp_path)] == ["last_000000000200.pt"]


def test_a_run_directory_removes_the_temporary_files_of_killed_writes(tmp_path: Path) -> None:
    RunDir(tmp_path).close()
    left = [tmp_path / ".config.json.tmp", tmp_path / "checkpoints" / ".last_000000000100.pt.tmp"]
    for path in left:
        path.write_bytes(b"half")
    RunDir(tmp_path, resume=True).close()
    assert not any(path.exists() for path in left)


def test_run_directories_are_one_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.strftime", lambda fmt: "20250101-000000")  # two runs started in the same second
    assert default_run_dir("vecfast/DoomBasic-v0", "appo") != default_run_dir("vecfast/DoomBasic-v0", "appo")
    used = RunDir(tmp_path / "used")
    used.log({"env_steps": 8})
    used.close()
    with pytest.raises(FileExistsError, match="resume=True"):
        RunDir(tmp_path / "used")
    RunDir(tmp_path / "untrained").close()  # no metrics, no checkpoint: nothing to resume or to lose
    RunDir(tmp_path / "untrained").close()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("not a run's")
    with pytest.raises(FileExistsError, match="resume=True"):
        RunDir(tmp_path / "other")
    live = RunDir(tmp_path / "live")
    try:
        with pytest.raises(RuntimeError, match="in use by a live run"):
            train("CartPole-v1", algo="ppo", run_dir=live.path, **FAST)
        with pytest.raises(RuntimeError, match="in use by a live run"):
            RunDir(live.path, resume=True)
    finally:
        live.close()
    RunDir(live.path, resume=True).close()  # free again once the run has ended
