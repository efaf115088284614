"""DD-PPO on torch.distributed (gloo, CPU, several ranks on this machine): identical ranks, preemption of
stragglers, the launchers (vecfast.train, torchrun on one and two "nodes", SLURM's variables), rank-0
checkpoints, resume, signals and restarts."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import psutil
import pytest
import torch
import torch.distributed as dist
from helpers import descendants, wait_gone

import vecfast
from vecfast.trainers.algorithm.ppo import PPO
from vecfast.trainers.base import collective
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.run.launch import init_process_group, launch_local, leave_process_group, rank_from_environment
from vecfast.trainers.run.run_dir import load_checkpoint
from vecfast.trainers.run.tune import available_cores
from vecfast.trainers.schemes.distributed import DistributedTrainer

pytestmark = pytest.mark.slow  # ranks launched by torchrun and vecfast

SMALL = {
    "num_workers": 1,
    "num_envs_per_worker": 4,
    "rollout": 16,
    "batch_size": 32,
    "use_rnn": False,
    "encoder_mlp_layers": (32, 32),
    "print_every_sec": None,
}


@pytest.fixture(autouse=True)
def private_tmpdir(tmp_path, monkeypatch):
    """The launchers and ranks these tests start keep their temporary files in tmp_path: torchrun's log
    directory (torchelastic_*) and inductor's cache (torchinductor_<user>) would stay in /tmp. Its path is
    long, as a user's TMPDIR may be: a Unix socket bound under it would pass the 107 bytes such a path may have."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir = tmpdir.with_name(tmpdir.name + "-" * max(0, 100 - len(str(tmpdir))))
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def model_digest(model: torch.nn.Module) -> str:
    """One hash of every parameter's and buffer's bytes."""
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def identical_updates(iterations: int) -> list[list[str]]:
    """In each rank: DD-PPO on CartPole with rank-seeded envs; after every update, every rank's model digest."""
    rank = rank_from_environment()
    init_process_group(rank, torch.device("cpu"))
    try:
        aux = {"aux_cpca_coeff": 0.1, "aux_inverse_dynamics_coeff": 0.1}  # their heads are in the model too
        cfg = TrainConfig.from_overrides(**{**SMALL, "use_rnn": True, "rnn_size": 16}, seed=10 * rank.rank, **aux)
        env = gym.make_vec("CartPole-v1", 4, vectorization_mode="sync")
        trainer = DistributedTrainer(env, PPO, cfg, total_env_steps=10**6)
        digests, observations = [], []
        for i, _ in enumerate(trainer.iterations()):
            everyone = [None] * rank.world_size
            seen = trainer.sampler.storage.obs["obs"].sum().item()  # this rank's rollout
            dist.all_gather_object(everyone, (model_digest(trainer.model), seen))
            digests.append([d for d, _ in everyone])
            observations.append([o for _, o in everyone])
            if i + 1 == iterations:
                break
        env.close()
        return [digests, observations]
    finally:
        leave_process_group()


@pytest.mark.timeout(180)
def test_ranks_hold_bit_identical_models_after_every_update():
    """Two ranks learn from different rollouts (their envs are seeded apart), yet after every update their
    parameters and normaliser statistics are bit for bit the same, and they did change; with the auxiliary losses
    on, so that their heads are in it too (they are the model's, so their gradients are averaged with the rest)."""
    digests, observations = launch_local(2, identical_updates, 4)
    assert len(digests) == 4
    for per_rank, seen in zip(digests, observations, strict=True):
        assert seen[0] != seen[1]  # each rank learned from its own data
        assert per_rank[0] == per_rank[1]
    assert len({per_rank[0] for per_rank in digests}) == 4  # every update changed the model


def gloo_threads() -> int:
    """This process's threads that run gloo collectives (two per process group)."""
    tasks = Path("/proc/self/task")
    return sum((task / "comm").read_text().strip() == "pt_gloo_runloop" for task in tasks.iterdir())


def threads_left_by_a_finished_rank() -> tuple[int, int]:
    """In each rank: a DD-PPO update, then the run leaves its group; gloo's threads before and after."""
    rank = rank_from_environment()
    init_process_group(rank, torch.device("cpu"))
    try:
        cfg = TrainConfig.from_overrides(**SMALL, seed=rank.rank)
        env = gym.make_vec("CartPole-v1", 4, vectorization_mode="sync")
        trainer = DistributedTrainer(env, PPO, cfg, total_env_steps=10**6)
        next(iter(trainer.iterations()))
        collective.all_mean({"last": 1.0})  # the run's last collective, on its own tensors
        trainer.close()
        env.close()
        del trainer
        before = gloo_threads()
    finally:
        leave_process_group()
    return before, gloo_threads()


@pytest.mark.timeout(180)
def test_a_finished_ranks_process_group_ends_with_its_run():
    """A rank's exit aborted now and then ("terminate called without an active exception"): DDP's reducer never
    frees its group, so the run's group outlived the run with its threads, one of them still releasing the last
    collective's tensors when the interpreter went down. DDP has a group of its own now, and leaving ends the
    run's group and its threads."""
    before, after = launch_local(2, threads_left_by_a_finished_rank)
    assert after == before - 2


def selfplay_books(iterations: int) -> list[list[dict]]:
    """In each rank: DD-PPO self-play on connect four (rank-seeded envs and draws); after every update, the model's
    digest and the league's books (Elo, snapshots, games), and the opponents this rank drew; every rank's rows."""
    from pettingzoo.classic import connect_four_v3

    from vecfast.multiagent.from_pettingzoo import vector_env_from
    from vecfast.selfplay import plan_for

    rank = rank_from_environment()
    init_process_group(rank, torch.device("cpu"))
    try:
        cfg = TrainConfig.from_overrides(
            **{**SMALL, "rollout": 8}, snapshot_every_updates=2, latest_opponent_probability=0.5, seed=10 * rank.rank,
            opponent_sampling="pfsp_hard",
        )  # fmt: skip
        env = vector_env_from(connect_four_v3, num_matches=4)
        trainer = DistributedTrainer(env, PPO, cfg, total_env_steps=10**6, plan=plan_for())
        league, rows = trainer.plan, []
        for i, metrics in enumerate(trainer.iterations()):
            rows.append(
                {
                    "digest": model_digest(trainer.model),
                    "elo": league.pool.elo.to_dict(),
                    "snapshots": list(league.pool.snapshots),
                    "games": dict(league.games),
                    "chances": league.pool.draw_probabilities().tolist() if league.pool.snapshots else [],
                    "episodes": metrics.episodes.episodes,
                }
            )
            if i + 1 == iterations:
                break
        rows[-1]["drawn"] = [(key, draw.opponent) for key, draw in sorted(league.draws.items())]
        env.close()
        everyone: list = [None] * rank.world_size
        dist.all_gather_object(everyone, rows)
        return everyone
    finally:
        leave_process_group()


@pytest.mark.timeout(180)
def test_ddppo_self_plays_with_the_jobs_books_in_every_rank():
    """Each rank draws its own opponents, yet the ranks' models stay bit-identical and every rank keeps the same
    Elo ratings, snapshots, game counts and PFSP's draw probabilities: the results of both ranks' games, gathered."""
    ranks = launch_local(2, selfplay_books, 8)
    zero, one = ranks
    for a, b in zip(zero, one, strict=True):
        assert a["digest"] == b["digest"]
        assert (a["elo"], a["snapshots"], a["games"]) == (b["elo"], b["snapshots"], b["games"])
        assert a["chances"] == b["chances"]  # PFSP's draws go by the job's win rates, the same in every rank
    assert len({row["digest"] for row in zero}) == len(zero)  # every update changed the model
    last = zero[-1]
    assert len(last["snapshots"]) >= 3 and last["games"]["snapshot"] > 0
    assert zero[-1]["drawn"] != one[-1]["drawn"]  # the draws are each rank's own
    # each game is rated once in the job: about one learner result per two slot episodes, both ranks' together
    games = sum(last["games"].values())
    assert 0.3 * last["episodes"] <= games <= 0.5 * last["episodes"]


def where_am_i() -> tuple[int, str]:
    """This rank's network namespace, and the port of the rendezvous store it reached."""
    return os.stat("/proc/self/ns/net").st_ino, os.environ["MASTER_PORT"]


@pytest.mark.timeout(120)
class WrongShape(ValueError):
    """An error a user's code raises in a rank."""


def fail_on_rank_1() -> int:
    rank = int(os.environ["RANK"])
    if rank == 1:
        raise WrongShape(f"rank {rank} got a bad batch")
    time.sleep(60)  # rank 0 would wait on rank 1 in a collective: the launcher stops it
    return rank


@pytest.mark.parametrize("isolated", [True, False], ids=["private-network", "host-network"])
def test_a_ranks_error_is_raised_in_the_caller_as_its_own_type(isolated, monkeypatch):
    """An error in a rank surfaces with its type, message and the rank that raised it, however the ranks were
    started (the launcher's ChildFailedError does not even unpickle across the private network's pipe)."""
    monkeypatch.setenv("VECFAST_NETWORK_ISOLATION", "1" if isolated else "0")
    start = time.monotonic()
    with pytest.raises(WrongShape) as raised:
        launch_local(2, fail_on_rank_1)
    assert "rank 1 got a bad batch" in str(raised.value)
    assert any("raised in rank 1 of 2" in note for note in raised.value.__notes__)
    assert time.monotonic() - start < 50  # rank 0 was stopped, not waited for


def test_a_distributed_runs_config_error_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="synchronous rollout has num_envs \\* rollout = 64 samples"):
        vecfast.train(
            "CartPole-v1", algo="ddppo", num_processes=2, total_env_steps=1000, run_dir=tmp_path / "run",
            **{**SMALL, "num_workers": 1, "num_envs_per_worker": 2, "rollout": 32, "batch_size": 96},
        )  # fmt: skip


def test_a_local_launch_listens_in_a_private_network_only():
    """torch's rendezvous store listens on every address of its network: a local launch runs it (and the
    ranks) in a network namespace of their own, whose only interface is loopback."""
    namespace, port = launch_local(2, where_am_i)
    assert namespace != os.stat("/proc/self/ns/net").st_ino
    listening = Path("/proc/net/tcp6").read_text() + Path("/proc/net/tcp").read_text()
    assert f":{int(port):04X} " not in listening  # (and the port is not in this network's table)


def slow_on_rank_0() -> gym.vector.VectorEnv:
    """CartPole whose envs take 3 ms per step in rank 0 only: rank 0 is the straggler."""
    delay = 0.003 if os.environ.get("RANK") == "0" else 0.0
    return gym.vector.SyncVectorEnv([lambda: SlowEnv(gym.make("CartPole-v1"), delay)] * 4)


class SlowEnv(gym.Wrapper):
    def __init__(self, env: gym.Env, delay: float) -> None:
        super().__init__(env)
        self.delay = delay

    def step(self, action):  # noqa: ANN001, ANN201
        time.sleep(self.delay)
        return self.env.step(action)


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "sync_frac, preempted, minibatch_of",
    [(0.5, True, "trajectories"), (1.0, False, "trajectories"), (0.5, True, "steps")],
)
def test_the_straggler_is_preempted_once_enough_ranks_finished(tmp_path, sync_frac, preempted, minibatch_of):
    """With sync_frac=0.5 of 2 ranks, the fast rank's finished rollout ends the slow rank's early (after at
    least a quarter of it), and the short rollout is learned from; with 1.0 every rollout is whole. Minibatches of
    shuffled steps too: the ranks take as many gradient steps (each a collective) from rollouts of unequal length."""
    run_dir = tmp_path / "run"
    vecfast.train(
        slow_on_rank_0, algo="ddppo", num_processes=2, total_env_steps=2 * 4 * 16 * 12, run_dir=run_dir,
        sync_frac=sync_frac, minibatch_of=minibatch_of, **SMALL,
    )  # fmt: skip
    steps = [m["rollout_steps"] for m in read_metrics(run_dir)]  # rank 0's, the slow one's
    assert all(s >= 4 for s in steps)  # min_rollout_fraction 0.25 of 16
    if preempted:
        assert np.median(steps) < 16, steps
    else:
        assert set(steps) == {16}


@pytest.mark.timeout(240)
def test_ddppo_from_vecfast_train_writes_one_run_and_resumes(tmp_path):
    run_dir = tmp_path / "run"
    result = vecfast.train(
        "CartPole-v1", algo="ddppo", num_processes=2, total_env_steps=4096, run_dir=run_dir, seed=3, **SMALL
    )
    assert result.stats["env_steps"] >= 4096 and result.run_dir == run_dir
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["algo"], config["scheme"], config["world_size"]) == ("ppo", "distributed", 2)
    steps = [m["env_steps"] for m in read_metrics(run_dir)]
    assert np.diff(steps).tolist() == [2 * 4 * 16] * (len(steps) - 1)  # both ranks' steps, every iteration
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint["env_steps"] == steps[-1] and checkpoint["scheme"] == "distributed"

    resumed = vecfast.train(
        "CartPole-v1", algo="ddppo", num_processes=2, total_env_steps=6144, run_dir=run_dir, resume=True, **SMALL
    )
    after = [m["env_steps"] for m in read_metrics(run_dir)][len(steps) :]
    assert after[0] == steps[-1] + 2 * 4 * 16 and resumed.stats["env_steps"] >= 6144


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vecfast_train_command(run_dir: Path, total: int, *extra: str) -> list[str]:
    config = ["--num_workers", "1", "--num_envs_per_worker", "4", "--rollout", "16", "--batch_size", "32"]
    config += ["--no-use_rnn", "--print_every_sec", "none"]
    return ["-m", "vecfast", "train", "CartPole-v1", "--algo", "ddppo", "--total-env-steps", str(total),
            "--run-dir", str(run_dir), "--no-live", *config, *extra]  # fmt: skip


def run_to_end(procs: list[subprocess.Popen], timeout: float) -> list[str]:
    outputs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=timeout)
        outputs.append(out)
        assert proc.returncode == 0, out[-12000:]
    return outputs


TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


@pytest.mark.timeout(240)
def test_torchrun_standalone_runs_vecfast_train(tmp_path):
    run_dir = tmp_path / "run"
    command = [*TORCHRUN, "--standalone", "--nproc_per_node=2", *vecfast_train_command(run_dir, 2048)]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    (out,) = run_to_end([proc], timeout=200)
    summaries = [line for line in out.splitlines() if line.startswith('  "run_dir"')]
    assert len(summaries) == 1  # rank 0 prints the summary
    assert read_metrics(run_dir)[-1]["env_steps"] >= 2048
    assert json.loads((run_dir / "config.json").read_text())["world_size"] == 2


@pytest.mark.timeout(240)
def test_two_torchrun_launchers_as_two_nodes(tmp_path):
    """--nnodes 2 with a c10d rendezvous on 127.0.0.1: one launcher per "node", one rank each."""
    run_dir, port = tmp_path / "run", free_port()
    procs = []
    for node in (0, 1):
        command = [*TORCHRUN, "--nnodes=2", f"--node_rank={node}", "--nproc_per_node=1", "--rdzv-backend=c10d",
                   f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=vecfast-test", "--local-addr=127.0.0.1",
                   *vecfast_train_command(run_dir, 2048)]  # fmt: skip
        procs.append(
            subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        )
    run_to_end(procs, timeout=200)
    assert json.loads((run_dir / "config.json").read_text())["world_size"] == 2
    assert read_metrics(run_dir)[-1]["env_steps"] >= 2048


@pytest.mark.timeout(240)
def test_ranks_started_by_slurm_variables(tmp_path):
    """What srun sets (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) is enough, with the master's port."""
    run_dir, port = tmp_path / "run", free_port()
    procs = []
    for rank in (0, 1):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_RANK"))}
        env.update(SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_LOCALID=str(rank), SLURM_NNODES="1",
                   SLURM_JOB_ID="4242", MASTER_PORT=str(port))  # fmt: skip
        command = [sys.executable, *vecfast_train_command(run_dir, 2048)]
        procs.append(
            subprocess.Popen(
                command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        )
    run_to_end(procs, timeout=200)
    assert json.loads((run_dir / "config.json").read_text())["world_size"] == 2


def wait_for_checkpoint(run_dir: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not list((run_dir / "checkpoints").glob("last_*.pt")):
        assert time.monotonic() < deadline, "no checkpoint was written"
        time.sleep(0.5)


def rank_processes(launcher: psutil.Process) -> list[psutil.Process]:
    return [p for p in descendants(launcher.pid) if "vecfast" in " ".join(p.cmdline()) and p.ppid() == launcher.pid]


@pytest.mark.timeout(240)
def test_sigusr1_to_a_rank_saves_and_every_rank_exits(tmp_path):
    """SIGUSR1 (a scheduler's warning before preemption) to one rank stops all at the same iteration, rank 0
    saves a final checkpoint, and the launcher exits 0."""
    run_dir = tmp_path / "run"
    command = [*TORCHRUN, "--standalone", "--nproc_per_node=2", *vecfast_train_command(run_dir, 10**9)]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    launcher = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    while not (run_dir / "metrics.jsonl").exists() or len(read_metrics(run_dir)) < 3:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.5)
    ranks = rank_processes(launcher)
    assert len(ranks) == 2
    ranks[1].send_signal(signal.SIGUSR1)
    (out,) = run_to_end([proc], timeout=120)
    assert '"interrupted": true' in out
    assert load_checkpoint(run_dir)["env_steps"] == read_metrics(run_dir)[-1]["env_steps"]


@pytest.mark.timeout(600)
def test_torchrun_restart_resumes_from_the_newest_checkpoint(tmp_path):
    """A rank killed mid-run: torchrun --max-restarts restarts both, and they continue from rank 0's newest
    checkpoint in the same (default) run directory instead of starting over."""
    command = [*TORCHRUN, "--standalone", "--nproc_per_node=2", "--max-restarts=1",
               *vecfast_train_command(Path("unused"), 20_000)]  # fmt: skip
    at = command.index("--run-dir")
    del command[at : at + 2]  # the default run directory, named by torchrun's run id
    command += ["--save_every_sec", "1"]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240  # room for a busy 2-core machine
    while not list(tmp_path.glob("runs/*/checkpoints/last_*.pt")):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.5)
    (run_dir,) = tmp_path.glob("runs/*")
    time.sleep(1.5)
    killed_at = load_checkpoint(run_dir)["env_steps"]
    rank_processes(psutil.Process(proc.pid))[1].kill()
    run_to_end([proc], timeout=300)
    steps = [m["env_steps"] for m in read_metrics(run_dir)]
    assert steps.count(2 * 4 * 16) == 1  # the restarted ranks (the run exits 0) did not start from zero
    assert killed_at in steps and steps[-1] >= 20_000 and list(tmp_path.glob("runs/*")) == [run_dir]


@pytest.mark.timeout(240)
def test_ranks_die_with_a_killed_launcher(tmp_path):
    """vecfast.train(num_processes=2) SIGKILLed: its ranks (and their env workers) go too."""
    script = (
        "import vecfast\n"
        "if __name__ == '__main__':\n"
        "    vecfast.train('CartPole-v1', algo='ddppo', num_processes=2, total_env_steps=10**9, run_dir='run', "
        "num_workers=1, num_envs_per_worker=4, rollout=16, batch_size=32, use_rnn=False, print_every_sec=None)\n"
    )
    (tmp_path / "owner.py").write_text(script)
    owner = subprocess.Popen([sys.executable, "owner.py"], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "run" / "metrics.jsonl").exists():
            assert time.monotonic() < deadline and owner.poll() is None
            time.sleep(0.5)
        started = descendants(owner.pid)
        assert len(started) >= 2
        owner.kill()
        owner.wait()
        assert not wait_gone(started, timeout=15), "processes outlived the killed launcher"
    finally:
        if owner.poll() is None:
            owner.kill()


def test_a_local_distributed_run_takes_one_rank_per_core_by_default(tmp_path):
    """`vecfast train ENV --algo ddppo` leaves no core idle: one rank per core (each with one torch thread)."""
    vecfast.train("CartPole-v1", algo="ddppo", total_env_steps=256, run_dir=tmp_path / "run", **SMALL)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["world_size"] == available_cores() and config["config"]["torch_threads"] == 1
    if config["world_size"] > 1:  # c10d's hostname warnings went to the run's log, not the terminal
        assert "[c10d] The hostname of the client socket cannot be retrieved" in (tmp_path / "run/env.log").read_text()


def test_each_rank_makes_its_batched_env_on_its_own_share_of_the_data():
    """PointNav's ranks drew the same scenes: each now gets scene_shard=(rank, world size); an env without
    shards, or a single process, gets nothing extra."""
    from vecfast.trainers.run.env_source import EnvSource
    from vecfast.trainers.run.launch import RankInfo
    from vecfast.trainers.run.runner import _rank_env_kwargs

    second = RankInfo(rank=1, world_size=2, local_rank=1)
    nav, cartpole = EnvSource.of("vecfast/PointNav-v0"), EnvSource.of("CartPole-v1")
    assert _rank_env_kwargs(nav, second) == {"scene_shard": (1, 2)}
    assert _rank_env_kwargs(nav, None) == {}
    assert _rank_env_kwargs(cartpole, second) == {}


@pytest.mark.timeout(240)
def test_sigterm_to_the_caller_stops_the_ranks_as_one_process_stops(tmp_path):
    """SIGTERM to the process that launched the ranks (``vecfast train --num_processes 2``, or a script calling
    ``train``) stops them after their iteration as it stops one process: a final checkpoint, exit 0, the summary
    naming SIGTERM. Before, the caller died of it (exit -15, no summary) and the ranks followed as orphans."""
    run_dir = tmp_path / "run"
    command = [sys.executable, *vecfast_train_command(run_dir, 10**9), "--num_processes", "2"]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not (run_dir / "metrics.jsonl").exists() or len(read_metrics(run_dir)) < 3:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.5)
    ranks = rank_processes(psutil.Process(proc.pid)) or descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    (out,) = run_to_end([proc], timeout=120)
    assert '"stopped_by": "SIGTERM"' in out
    assert load_checkpoint(run_dir)["env_steps"] == read_metrics(run_dir)[-1]["env_steps"]
    assert wait_gone(ranks, timeout=10) == []
