"""``vecfast train --config FILE``: options from YAML or JSON under their command-line names; a run's own
``config.json`` replays it; the command line's options win."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vecfast.cli import main

RUN_RECORD = ("vecfast_version",)  # the same here; everything else a replay must reproduce
SMALL = ["--num_workers", "2", "--num_envs_per_worker", "2", "--rollout", "16", "--batch_size", "64"]


def config_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "config.json").read_text())


def test_a_runs_config_json_replays_the_run(tmp_path: Path) -> None:
    first = tmp_path / "first"
    argv = ["train", "CartPole-v1", "--algo", "ppo", "--total-env-steps", "256", "--run-dir", str(first),
            "--env-kwarg", "max_episode_steps=50", "--use_rnn", "false", "--learning_rate", "0.0003",
            *SMALL]  # fmt: skip
    assert main(argv) == 0
    replay = tmp_path / "replay"
    assert main(["train", "--config", str(first / "config.json"), "--run-dir", str(replay)]) == 0
    assert config_of(replay) == config_of(first)  # env, algorithm, scheme, total, env kwargs, every config key


def test_a_yaml_file_of_options_and_the_command_line_over_it(tmp_path: Path) -> None:
    options = tmp_path / "options.yaml"
    options.write_text(
        "env: CartPole-v1\nalgo: ppo\ntotal_env_steps: 256\nenv_kwargs:\n  max_episode_steps: 40\n"
        "num_workers: 2\nnum_envs_per_worker: 2\nrollout: 16\nbatch_size: 64\nencoder_mlp_layers: [32, 32]\n"
    )
    run_dir = tmp_path / "run"
    assert main(["train", "--config", str(options), "--run-dir", str(run_dir), "--batch_size", "32"]) == 0
    written = config_of(run_dir)
    assert (written["env"], written["algo"], written["total_env_steps"]) == ("CartPole-v1", "ppo", 256)
    assert written["env_kwargs"] == {"max_episode_steps": 40}
    assert written["config"]["batch_size"] == 32 and written["config"]["rollout"] == 16  # the command line's wins
    assert written["config"]["encoder_mlp_layers"] == [32, 32]


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"env": "CartPole-v1", "batch_sise": 64}', "unknown config keys ['batch_sise'] ('batch_sise': did you "
         "mean 'batch_size'?"),
        ("[1, 2]", "must hold a mapping of options, got list"),
        ('{"env": ', "is not valid JSON"),
    ],
)  # fmt: skip
def test_a_bad_file_is_one_line_naming_it(tmp_path: Path, capsys, text: str, message: str) -> None:
    path = tmp_path / "options.json"
    path.write_text(text)
    assert main(["train", "--config", str(path), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vecfast train: error: ") and message in err and str(path) in err and err.count("\n") == 1


def test_config_and_resume_are_not_combined(tmp_path: Path, capsys) -> None:
    path = tmp_path / "options.yaml"
    path.write_text("env: CartPole-v1\n")
    assert main(["train", "--config", str(path), "--resume", str(tmp_path / "run")]) == 2
    assert "--config starts a new run" in capsys.readouterr().err
