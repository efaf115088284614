"""``vecfast train`` / ``vecfast enjoy`` / ``vecfast tune`` subcommands, through ``vecfast.cli.main``."""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import cv2
import pytest
from PIL import Image

from vecfast.cli import build_parser, main
from vecfast.trainers import config as config_module
from vecfast.trainers.config import TrainConfig, field_docs
from vecfast.trainers.run.evaluation import evaluate


def run_cli(argv: list[str]) -> int:
    """``vecfast ARGV`` in this process; an error raises with its traceback (--debug)."""
    return main(["--debug", *argv])


def one_error_line(capsys: pytest.CaptureFixture, argv: list[str], command: str = "train") -> str:
    """``vecfast ARGV``'s error: exit status 2 and one line on stderr, which it returns."""
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"vecfast {command}: error: "), lines
    return lines[0]


# a tiny PPO on CartPole: a few seconds on two cores
TINY = ["--algo", "ppo", "--num_workers", "1", "--num-envs-per-worker", "4", "--rollout", "16", "--batch_size", "64"]
TINY += ["--encoder_mlp_layers", "16"]


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
    assert [line.split(":")[0] for line in lines[:2]] == ["episode 0", "episode 1"]
    assert lines[2].startswith("mean return ") and lines[2].endswith(" over 2 episodes")
    result = evaluate(run_dir, episodes=2, max_steps=10_000)  # what enjoy prints is what evaluate measures
    assert lines == result.lines() and result.returns == tuple(map(float, result.lengths))  # CartPole pays 1 a step


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
    length = int(capsys.readouterr().out.splitlines()[0].rsplit("length ", 1)[1])  # 20, or less if the shot hit
    capture = cv2.VideoCapture(str(video))
    assert capture.get(cv2.CAP_PROP_FRAME_COUNT) == length <= 20
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


def test_tuple_options_read_their_items_type() -> None:
    train = build_parser()._actions[-1].choices["train"]
    args = train.parse_args(["CartPole-v1", "--polar-inputs", "goal", "--encoder_mlp_layers", "32", "16"])
    assert args.polar_inputs == ["goal"] and args.encoder_mlp_layers == [32, 16]


def test_every_config_option_says_what_it_does_and_its_default() -> None:
    docs = field_docs()
    fields = dataclasses.fields(TrainConfig)
    assert set(docs) == {field.name for field in fields}  # a new key needs its docstring
    subcommands = build_parser()._actions[-1].choices
    for command in ("train", "tune"):
        actions: dict = {}
        for action in subcommands[command]._actions:  # a boolean's --no-key comes second, with no help of its own
            actions.setdefault(action.dest, action)
        for field in fields:
            if command == "tune" and field.name in config_module.TUNED_KEYS:
                assert field.name not in actions
                continue
            text = actions[field.name].help
            assert text.startswith(docs[field.name].replace("%", "%%")) and len(docs[field.name].split()) >= 2, text
            assert text.endswith(")") and "(default: " in text, text


def test_resume_continues_the_run_with_its_own_config(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run_dir = tmp_path / "run"
    # the real command, stdout a pipe: no live dashboard there, only the JSON summary
    argv = ["train", "CartPole-v1", "--total-env-steps", "512", "--run-dir", str(run_dir), *TINY]
    done = subprocess.run(
        [sys.executable, "-m", "vecfast", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["env_steps"] == 512
    first = json.loads((run_dir / "config.json").read_text())
    assert first["total_env_steps"] == 512 and first["config"]["rollout"] == 16
    # as if it had been stopped half-way through 1024 env steps
    (run_dir / "config.json").write_text(json.dumps({**first, "total_env_steps": 1024}))

    assert run_cli(["train", "--resume", str(run_dir)]) == 0  # no env id, algo, total or config repeated
    assert json.loads(capsys.readouterr().out)["env_steps"] == 1024
    resumed = json.loads((run_dir / "config.json").read_text())
    assert (resumed["env"], resumed["algo"], resumed["total_env_steps"]) == ("CartPole-v1", "ppo", 1024)
    assert resumed["config"] == first["config"]
    steps = [json.loads(line)["env_steps"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(64, 1024 + 1, 64))  # on from the checkpoint at 512

    argv = ["train", "--resume", str(run_dir), "--total-env-steps", "1536", "--learning_rate", "0.0005"]
    assert run_cli(argv) == 0
    assert json.loads(capsys.readouterr().out)["env_steps"] == 1536
    again = json.loads((run_dir / "config.json").read_text())
    assert again["total_env_steps"] == 1536
    assert again["config"] == {**first["config"], "learning_rate": 0.0005}  # only what was given changed

    line = one_error_line(capsys, ["train", "--resume", str(run_dir)])
    assert "has trained its 1,536 env steps" in line and "--total-env-steps N" in line
    line = one_error_line(capsys, ["train", "MountainCar-v0", "--resume", str(run_dir)])
    assert "is a run of env 'CartPole-v1', not 'MountainCar-v0'" in line
    line = one_error_line(capsys, ["train", "--resume", str(run_dir), "--algo", "appo"])
    assert "is a run of algo 'ppo', not 'appo'" in line
    line = one_error_line(capsys, ["train", "CartPole-v1", "--run-dir", str(run_dir)])
    assert "holds a run already" in line and f"--resume {run_dir}" in line


def test_options_are_never_abbreviated_and_num_envs_is_the_total(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``--num-envs 4`` once trained on 8 envs (argparse took it for --num-envs-per-worker 4)."""
    for abbreviated in (["--num-envs-per", "4"], ["--total", "100"], ["--learning", "0.1"]):
        with pytest.raises(SystemExit) as exited:
            main(["train", "CartPole-v1", *abbreviated])
        assert exited.value.code == 2 and f"unrecognized arguments: {abbreviated[0]}" in capsys.readouterr().err
    argv = ["train", "CartPole-v1", "--algo", "ppo", "--num-envs", "4", "--rollout", "16", "--batch_size", "64",
            "--total-env-steps", "128", "--env-kwarg", "max_episode_steps=6",
            "--run-dir", str(tmp_path / "run")]  # fmt: skip
    assert run_cli(argv) == 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["num_envs"] == 4 and config["config"]["num_envs_per_worker"] == 2
    assert config["env_kwargs"] == {"max_episode_steps": 6}
    capsys.readouterr()
    line = one_error_line(capsys, ["train", "CartPole-v1", "--num-envs", "5"])
    assert line.endswith(
        "num_envs=5 does not split evenly over num_workers=2: choose a multiple of 2, or give num_workers too"
    )
    line = one_error_line(capsys, ["train", "CartPole-v1", "--num-envs", "4", "--num_envs_per_worker", "2"])
    assert "not both" in line


def test_evaluate_on_the_command_line_makes_the_runs_env(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run_dir = tmp_path / "run"
    argv = ["train", "CartPole-v1", "--total-env-steps", "128", "--run-dir", str(run_dir), "--env-kwarg",
            "max_episode_steps=6", *TINY]  # fmt: skip
    assert run_cli(argv) == 0
    capsys.readouterr()
    assert run_cli(["evaluate", str(run_dir), "--episodes", "3", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["lengths"] == [6, 6, 6] and shown["env"] == "CartPole-v1" and shown["deterministic"] is True
    assert shown == {**shown, **evaluate(run_dir, episodes=3).to_dict()}
    argv = ["evaluate", str(run_dir), "--episodes", "2", "--stochastic", "--env-kwarg", "max_episode_steps=7"]
    assert run_cli(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"CartPole-v1, last checkpoint of {run_dir}, sampled actions:"
    assert out[1] == "mean return 7.00 +- 0.00, mean length 7.0 over 2 episodes"
    line = one_error_line(capsys, ["evaluate", str(run_dir), "--env", "CartPol-v1"], command="evaluate")
    assert "registered ids like it: CartPole-v1" in line


def test_tune_makes_the_env_with_its_env_kwargs_and_says_so(capsys: pytest.CaptureFixture) -> None:
    argv = ["tune", "CartPole-v1", "--seconds", "0.2", "--env-kwarg", "max_episode_steps=7"]
    assert run_cli(argv) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    assert said.startswith("train with: vecfast train CartPole-v1 --algo appo --num_workers ")
    assert "--env-kwarg max_episode_steps=7  (or --num_workers auto)" in said
    assert main(["tune", "CartPole-v1", "--seconds", "0.2", "--env-kwarg", "bogus=1"]) == 1  # the env refused it
    (line,) = capsys.readouterr().err.splitlines()
    assert "unexpected keyword argument 'bogus' was raised from the environment creator for CartPole-v1" in line


def test_env_kwarg_values_are_python_literals_else_strings() -> None:
    from vecfast.command_line import env_kwarg

    assert env_kwarg("num_bots=3") == ("num_bots", 3)
    assert env_kwarg("reward_shaping={'frag': 1.0, 'death': -0.5}") == ("reward_shaping", {"frag": 1.0, "death": -0.5})
    assert env_kwarg("resolution=(64, 64)") == ("resolution", (64, 64))
    assert env_kwarg("flag=True") == ("flag", True) and env_kwarg("limit=None") == ("limit", None)
    assert env_kwarg("scenes=/data/scenes") == ("scenes", "/data/scenes") and env_kwarg("split=val") == ("split", "val")
    assert env_kwarg("name='42'") == ("name", "42") and env_kwarg("empty=") == ("empty", "")
    for bad in ("novalue", "=3", "two words=1"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected KEY=VALUE"):
            env_kwarg(bad)


def test_user_errors_of_train_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    line = one_error_line(capsys, ["train", "CartPole-v1", "--device", "cuda", "--run-dir", str(tmp_path / "gpu")])
    assert "device='cuda' but torch sees no CUDA GPU here" in line and "use device='cpu' or 'auto'" in line
    assert not (tmp_path / "gpu").exists()
    line = one_error_line(capsys, ["train", "CartPole-v1", "--algo", "dqn"])
    assert line.endswith("unknown algorithm 'dqn'; registered: appo, ddppo, ppo")
    line = one_error_line(capsys, ["train", "CartPole-v1", "--rollout", "30"])
    assert line.endswith("invalid config: batch_size (512) must be a multiple of rollout (30)")
    sync = ["train", "CartPole-v1", "--algo", "ppo", "--num_workers", "1", "--num_envs_per_worker", "2"]
    line = one_error_line(capsys, [*sync, "--batch_size", "96", "--run-dir", str(tmp_path / "sync")])
    assert line.endswith(
        "invalid config: a synchronous rollout has num_envs * rollout = 64 samples; batch_size=96 must divide it"
    )
    assert not (tmp_path / "sync").exists()
    line = one_error_line(capsys, ["tune", "CartPole-v1", "--nonlinearity", "gelu"], command="tune")
    assert "nonlinearity must be 'elu', 'relu' or 'tanh'" in line
    run_dir = tmp_path / "live"
    run_dir.mkdir()
    with open(run_dir / ".lock", "a") as lock:  # as a live run holds it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        line = one_error_line(capsys, ["train", "CartPole-v1", "--run-dir", str(run_dir), *TINY])
    assert "is in use by a live run" in line
    line = one_error_line(capsys, ["train", "--resume", str(run_dir)])
    assert line.endswith("holds no run: it has no config.json")
    (run_dir / "config.json").write_text(json.dumps({"env": "CartPole-v1", "algo": "ppo", "config": {}}))
    line = one_error_line(capsys, ["enjoy", str(run_dir)], command="enjoy")
    assert line.endswith("has no checkpoint (checkpoints/last_*.pt) yet")


MISSING_IN_THE_WORKER = """
import multiprocessing
import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

class NeedsAModule(CartPoleEnv):
    def __init__(self, error="dependency", **kwargs):
        super().__init__(**kwargs)
        if multiprocessing.parent_process() is not None:  # in vecfast's worker only
            if error == "dependency":
                raise gym.error.DependencyNotInstalled("opencv-python package not installed")
            raise ModuleNotFoundError("No module named 'ale_py'", name="ale_py")

gym.register("NeedsAModule-v0", entry_point=NeedsAModule, max_episode_steps=100)
"""


def test_a_module_missing_in_an_envs_worker_is_one_line_naming_it(tmp_path: Path, capsys, monkeypatch) -> None:
    """As a game whose wrapper needs OpenCV (gymnasium's DependencyNotInstalled) or an extra's module: one line
    naming the env and what to install, not the worker's traceback."""
    (tmp_path / "needs_a_module.py").write_text(MISSING_IN_THE_WORKER)
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["train", "needs_a_module:NeedsAModule-v0", "--total-env-steps", "64", *TINY]
    line = one_error_line(capsys, [*argv, "--run-dir", str(tmp_path / "a")])
    assert line.endswith("error: env 0 (worker 0) raised DependencyNotInstalled: opencv-python package not installed")
    line = one_error_line(capsys, [*argv, "--run-dir", str(tmp_path / "b"), "--env-kwarg", "error=module"])
    assert "needs ale_py, which vecfast's 'atari' extra installs: pip install 'vecfast[atari]'" in line


def test_a_pettingzoo_game_trains_and_evaluates_against_opponents_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run_dir = tmp_path / "run"
    argv = ["train", "pettingzoo.classic.connect_four_v3", "--total-env-steps", "512", "--run-dir", str(run_dir),
            "--num_workers", "1", "--num-envs-per-worker", "4", "--rollout", "8", "--batch_size", "64"]  # fmt: skip
    assert run_cli(argv) == 0
    capsys.readouterr()
    for opponent in ("random", "initial", "vecfast.selfplay.bots:one_ply_connect_four", str(run_dir)):
        assert run_cli(["evaluate", str(run_dir), "--episodes", "4", "--opponent", opponent, "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["env"] == "pettingzoo.classic.connect_four_v3" and len(shown["returns"]) == 4
        rates = shown["metrics"]
        assert rates["win_rate"] + rates["draw_rate"] + rates["loss_rate"] == 1.0
    # enjoy plays it too (it refused the module as an unknown env id), and films its games (it refused that)
    assert run_cli(["enjoy", str(run_dir), "--episodes", "2", "--no-video"]) == 0
    shown = capsys.readouterr().out
    assert "win rate " in shown and "(95% interval " in shown
    assert run_cli(["enjoy", str(run_dir), "--episodes", "2", "--video", str(tmp_path / "c4.gif")]) == 0
    assert "win rate " in capsys.readouterr().out and (tmp_path / "c4.gif").read_bytes()[:6] == b"GIF89a"


def test_a_wrong_key_or_option_names_the_closest_valid_one(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import vecfast

    with pytest.raises(TypeError, match=r"'total_steps': did you mean 'total_env_steps'\?"):
        vecfast.train("CartPole-v1", total_steps=100, run_dir=tmp_path / "run")
    with pytest.raises(TypeError, match=r"'lr': did you mean 'learning_rate'"):
        TrainConfig.from_overrides(lr=0.1)
    with pytest.raises(SystemExit):
        main(["train", "CartPole-v1", "--lr", "0.001"])
    assert "--lr: did you mean --learning_rate" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_misspelt_option_is_pointed_to_an_option_that_exists(capsys: pytest.CaptureFixture) -> None:
    """The hint names the option as the parser knows it (every option takes both spellings, so either is one)."""
    with pytest.raises(SystemExit):
        main(["train", "CartPole-v1", "--num_procesess", "2"])
    error = capsys.readouterr().err
    assert "--num_procesess: did you mean --num-processes" in error


def test_train_help_shows_the_defaults_of_the_envs_family(capsys: pytest.CaptureFixture) -> None:
    def default_of(argv: list[str], option: str) -> str:
        with pytest.raises(SystemExit):
            main(argv)
        text = " ".join(capsys.readouterr().out.split())
        return text.split(f"{option} X, --{option.replace('_', '-')} X ", 1)[1].split("(default: ", 1)[1].split(")")[0]

    assert default_of(["train", "CartPole-v1", "--help"], "learning_rate") == "0.001"  # the vector family's
    assert default_of(["train", "--help"], "learning_rate") == str(TrainConfig.learning_rate)  # no env: TrainConfig's


def test_an_atari_id_without_its_package_says_what_to_install() -> None:
    """gymnasium 1.x registers no ALE ids by itself: ``ALE/Pong-v5`` said only "Namespace ALE not found"."""
    script = (
        "import sys; sys.modules['ale_py'] = None  # as if ale-py were not installed\n"
        "from vecfast.cli import main; sys.exit(main(['train', 'ALE/Pong-v5']))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "vecfast train: error: vecfast train needs ale_py, which vecfast's 'atari' extra installs: "
        "pip install 'vecfast[atari]'"
    )
    if importlib.util.find_spec("ale_py") is not None:  # and with it installed, the id needs no module prefix
        done = subprocess.run([sys.executable, "-m", "vecfast", "train", "ALE/Pong-v5", "--help"], capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0 and "a run of ALE/Pong-v5 with appo" in " ".join(done.stdout.split())


def test_the_config_options_are_grouped_by_concern_every_key_in_one_group(capsys: pytest.CaptureFixture) -> None:
    from vecfast.trainers.config import CONFIG_GROUPS

    grouped = [key for keys in CONFIG_GROUPS.values() for key in keys]
    assert sorted(grouped) == sorted(f.name for f in dataclasses.fields(TrainConfig))  # a new key needs its group
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    positions = [text.index(f"config: {concern}:") for concern in CONFIG_GROUPS]
    assert positions == sorted(positions)
    assert text.index("--learning_rate") > text.index("config: PPO:") > text.index("--rollout")


def test_the_command_line_and_the_functions_share_their_defaults() -> None:
    """One place for the defaults of the entry points' own arguments (vecfast.trainers.entry_defaults): an option
    left out means what the function's argument left out means."""
    import inspect

    from vecfast.trainers.run.evaluation import evaluate
    from vecfast.trainers.run.training import train
    from vecfast.trainers.run.tune import tune
    from vecfast.trainers.tools.enjoy import enjoy
    from vecfast.trainers.tools.export import export_run

    def default(function, name):
        return inspect.signature(function).parameters[name].default

    parser = build_parser()
    tuned = parser.parse_args(["tune", "CartPole-v1"])
    assert (tuned.algo, tuned.seconds) == (default(tune, "algo"), default(tune, "seconds"))
    evaluated = parser.parse_args(["evaluate", "RUN"])
    assert (evaluated.seed, evaluated.checkpoint) == (default(evaluate, "seed"), default(evaluate, "which"))
    enjoyed = parser.parse_args(["enjoy", "RUN"])
    assert (enjoyed.episodes, enjoyed.seed, enjoyed.checkpoint) == (
        default(enjoy, "episodes"), default(enjoy, "seed"), default(enjoy, "which")
    )  # fmt: skip
    exported = parser.parse_args(["export", "RUN"])
    assert (exported.format, exported.checkpoint) == (default(export_run, "fmt"), default(export_run, "which"))
    assert f"(default {default(train, 'algo')};" in parser._subparsers._group_actions[0].choices["train"].format_help()
