"""What leaves a run besides its own files: Weights & Biases (the real ``wandb`` package, offline) and videos
recorded while training (``video_every_env_steps``: the run dir's H.264 mp4s, TensorBoard, W&B)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import decoded, wandb_records
from pettingzoo.classic import connect_four_v3
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from vecfast.cli import main
from vecfast.trainers import train

FAST = {"num_workers": 2, "num_envs_per_worker": 2, "rollout": 32, "batch_size": 128, "use_rnn": False, "seed": 0}
WANDB = {"with_wandb": True, "wandb_project": "vecfast-tests", "wandb_group": "seeds", "wandb_tags": ("a", "b")}


@pytest.fixture(autouse=True)
def offline_wandb(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")


def wandb_run(run_dir: Path, session: int = -1) -> tuple[str, list]:
    """The W&B run id of ``run_dir`` and the records its ``session``-th sitting wrote (oldest first)."""
    run_id = (run_dir / "wandb_run_id").read_text().strip()
    sittings = sorted((run_dir / "wandb").glob(f"offline-run-*-{run_id}"))
    return run_id, wandb_records(sittings[session] / f"run-{run_id}.wandb")


def history(records: list) -> list[dict]:
    rows = []
    for record in records:
        if record.WhichOneof("record_type") == "history":
            rows.append(
                {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            )
    return rows


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("logged") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_MODE", "offline")
        patch.setenv("WANDB_SILENT", "true")
        train("CartPole-v1", algo="ppo", total_env_steps=4096, run_dir=run_dir, video_every_env_steps=2048,
              **WANDB, **FAST)  # fmt: skip
    return run_dir


def test_wandb_gets_every_record_of_metrics_jsonl_against_env_steps(logged: Path) -> None:
    lines = [json.loads(line) for line in (logged / "metrics.jsonl").read_text().splitlines()]
    _, records = wandb_run(logged)
    rows = [row for row in history(records) if "video/_type" not in row]
    assert [row["env_steps"] for row in rows] == [line["env_steps"] for line in lines]
    for row, line in zip(rows, lines, strict=True):
        numbers = {k: v for k, v in line.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        assert {k: row[k] for k in numbers} == pytest.approx(numbers, rel=1e-6)


def test_wandb_gets_the_config_the_project_group_tags_and_name(logged: Path) -> None:
    run_id, records = wandb_run(logged)
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert (run.run_id, run.project, run.run_group, list(run.tags)) == (run_id, "vecfast-tests", "seeds", ["a", "b"])
    assert run.display_name == logged.name
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    written = json.loads((logged / "config.json").read_text())
    assert config["algo"] == written["algo"] == "ppo" and config["env"] == "CartPole-v1"
    assert config["config"]["batch_size"] == written["config"]["batch_size"] == 128


def test_videos_go_to_the_run_dir_as_h264_and_to_tensorboard_and_wandb(logged: Path) -> None:
    videos = sorted((logged / "videos").glob("*.mp4"))
    assert [v.name for v in videos] == ["000000002048.mp4", "000000004096.mp4"]
    for video in videos:
        meta, frames = decoded(video)
        assert meta["codec"].startswith("h264") and 1 <= len(frames) <= 500
    events = EventAccumulator(str(logged), size_guidance={"images": 0})
    events.Reload()
    assert [image.step for image in events.Images("video")] == [2048, 4096]
    assert events.Images("video")[0].encoded_image_string[:6] == b"GIF89a"
    _, records = wandb_run(logged)
    logged_videos = [row for row in history(records) if "video/_type" in row]  # W&B flattens a media dict
    assert [row["env_steps"] for row in logged_videos] == [2048, 4096]
    assert all(row["video/_type"] == "video-file" and row["video/path"].endswith(".mp4") for row in logged_videos)
    metrics = [json.loads(line) for line in (logged / "metrics.jsonl").read_text().splitlines()]
    assert [m["env_steps"] for m in metrics if "video/return" in m] == [2048, 4096]


def test_a_resumed_run_goes_on_in_the_same_wandb_run(logged: Path) -> None:
    run_id, _ = wandb_run(logged)
    train("CartPole-v1", algo="ppo", total_env_steps=5120, run_dir=logged, resume=True)
    resumed_id, records = wandb_run(logged)
    assert resumed_id == run_id and len(list((logged / "wandb").glob(f"offline-run-*-{run_id}"))) == 2
    assert history(records)[-1]["env_steps"] >= 5120


def test_the_cli_takes_sample_factorys_wandb_options(tmp_path: Path, monkeypatch, capfd) -> None:
    """... and keeps the terminal quiet: no wandb banner, no history or summary at the end (W&B's own
    ``WANDB_SILENT``, which the other tests set, unset here as on a user's machine)."""
    monkeypatch.delenv("WANDB_SILENT")
    run_dir = tmp_path / "run"
    argv = ["train", "CartPole-v1", "--algo", "ppo", "--total-env-steps", "256", "--run-dir", str(run_dir),
            "--with_wandb", "true", "--wandb_project", "cli", "--wandb_group", "g", "--wandb_tags", "x", "y",
            "--num_workers", "2", "--num_envs_per_worker", "2", "--rollout", "32", "--batch_size", "128"]  # fmt: skip
    assert main(argv) == 0
    _, records = wandb_run(run_dir)
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert (run.project, run.run_group, list(run.tags)) == ("cli", "g", ["x", "y"])
    assert json.loads((run_dir / "config.json").read_text())["config"]["with_wandb"] is True
    out, err = capfd.readouterr()
    assert "wandb" not in err and "wandb" not in out.replace('"with_wandb"', ""), err


def test_a_board_game_run_records_a_game_against_the_random_opponent(tmp_path: Path) -> None:
    """Videos of games were refused (their evaluation played AEC games one by one, without frames); they now play
    on the run's own kind of matches, which render."""
    run_dir = tmp_path / "run"
    train(connect_four_v3, algo="ppo", total_env_steps=600, run_dir=run_dir, video_every_env_steps=200, **FAST)
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    recorded = [line["env_steps"] for line in lines if "video/return" in line]
    videos = sorted((run_dir / "videos").glob("*.mp4"))
    assert len(recorded) >= 2 and [v.name for v in videos] == [f"{steps:012d}.mp4" for steps in recorded]
    for video in videos:
        meta, frames = decoded(video)
        assert meta["codec"].startswith("h264") and len(frames) >= 7  # a game of connect four: 7 moves at least
    assert {line["video/return"] for line in lines if "video/return" in line} <= {-1.0, 0.0, 1.0}


def test_no_wandb_process_outlives_the_run(tmp_path: Path, process_guard) -> None:
    train("CartPole-v1", algo="ppo", total_env_steps=256, run_dir=tmp_path / "run", **WANDB, **FAST)
    assert process_guard.new_descendants() == []


def test_two_sittings_within_one_second_keep_both_event_files(tmp_path: Path, monkeypatch) -> None:
    """tensorboardX names an event file by the second it opens it: a resumed run that starts within the same second
    (CI did) overwrote its last sitting's events."""
    import tensorboardX.event_file_writer

    from vecfast.trainers.run.metric_sinks import TensorBoardEvents

    monkeypatch.setattr(tensorboardX.event_file_writer.time, "time", lambda: 1_800_000_000.0)
    for resumed_at, steps in ((None, 64), (64, 128)):
        events = TensorBoardEvents(tmp_path, resumed_at)
        events.log({"env_steps": steps, "loss": 1.0})
        events.close()
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2
    accumulator = EventAccumulator(str(tmp_path))
    accumulator.Reload()
    assert [event.step for event in accumulator.Scalars("loss")] == [64, 128]
