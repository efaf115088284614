"""``vecfast train`` / ``vecfast enjoy`` subcommands (parsed by a parser they are added to, as vecfast/cli.py does)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import cv2
import pytest
from PIL import Image

from vecfast.trainers.cli import add_train_commands


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="vecfast")
    add_train_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


def test_train_then_enjoy_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run_dir = tmp_path / "run"
    argv = ["train", "CartPole-v1", "--algo", "ppo", "--total-env-steps", "1024", "--run-dir", str(run_dir)]
    argv += ["--num_workers", "1", "--num-envs-per-worker", "4", "--rollout", "16", "--batch_size", "64"]
    argv += ["--encoder_mlp_layers", "32", "32", "--no-normalize_input", "--ppo_clip_value", "0.2", "--no-live"]
    assert run_cli(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["env_steps"] >= 1024 and Path(summary["run_dir"]) == run_dir
    config = json.loads((run_dir / "config.json").read_text())["config"]
    assert config["encoder_mlp_layers"] == [32, 32] and config["normalize_input"] is False
    assert config["ppo_clip_value"] == 0.2 and config["num_envs_per_worker"] == 4
    assert run_cli(["enjoy", str(run_dir), "--episodes", "2", "--no-video", "--checkpoint", "last"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["episode 0", "episode 1"]
    assert all(float(line.split()[-1]) >= 1 for line in lines)  # CartPole pays 1 per step


def test_enjoy_writes_videos_of_doom_episodes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("vizdoom")
    run_dir = tmp_path / "doom"
    argv = ["train", "vecfast/DoomBasic-v0", "--total-env-steps", "64", "--run-dir", str(run_dir), "--no-live"]
    argv += ["--num_workers", "1", "--num_envs_per_worker", "2", "--rollout", "8", "--batch_size", "16"]
    argv += ["--rnn_size", "16", "--encoder_conv_mlp_layers", "32", "--encoder_mlp_layers", "8"]
    assert run_cli(argv) == 0
    capsys.readouterr()
    video = tmp_path / "episodes.mp4"
    assert run_cli(["enjoy", str(run_dir), "--episodes", "1", "--video", str(video), "--max-steps", "20"]) == 0
    capture = cv2.VideoCapture(str(video))
    assert capture.get(cv2.CAP_PROP_FRAME_COUNT) == 20
    assert (capture.get(cv2.CAP_PROP_FRAME_WIDTH), capture.get(cv2.CAP_PROP_FRAME_HEIGHT)) == (160, 120)
    capture.release()
    gif = tmp_path / "episodes.gif"
    argv = ["enjoy", str(run_dir), "--episodes", "1", "--video", str(gif), "--max-steps", "20", "--stochastic"]
    assert run_cli(argv) == 0
    with Image.open(gif) as image:
        assert 1 < image.n_frames <= 20 and image.size == (160, 120)  # (Pillow merges identical frames)


def test_unknown_values_are_rejected_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        run_cli(["train", "CartPole-v1", "--rollout", "many"])
    with pytest.raises(SystemExit):
        run_cli(["train", "CartPole-v1", "--encoder_bf16", "maybe"])
