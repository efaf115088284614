"""APPO's samplers on a real Ray cluster of two nodes on this machine (Ray's own ``cluster_utils``): the remote
vector env against vecfast's local one on the same seeds and actions, a sampler SIGKILLed mid-run (the other's
trajectories unchanged, one restart, nothing left over), CartPole trained over both nodes, and the sockets a
Ray that vecfast starts opens."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

# as Ray's docs say for a cluster with token authentication (the default of `ray start --head` since Ray 2.5x):
# the mode is read when ray is imported, so it is set before
os.environ.setdefault("RAY_AUTH_MODE", "token")
ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow  # Ray nodes started and stopped, actors restarted

import vecfast  # noqa: E402
from vecfast.cluster.local_nodes import LocalNodes  # noqa: E402
from vecfast.cluster.remote_vector_env import RemoteVectorEnv  # noqa: E402
from vecfast.vector.errors import WorkerDiedError  # noqa: E402

ENVS_PER_SAMPLER = 4
# a sampler's vector env, made on its node: only importable functions travel to the Ray workers
MAKE = functools.partial(vecfast.make_vec, "CartPole-v1", ENVS_PER_SAMPLER, "shared_memory", {"num_workers": 2})


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalNodes]:
    """A head node and a second node on this machine, one CPU each (a sampler fits on each, not two on one),
    started as a user starts a cluster: ``ray start`` twice (their processes are not this one's children)."""
    with LocalNodes(num_nodes=2, num_cpus=1) as nodes:
        yield nodes
    assert not cluster_processes(nodes), "stop() left processes of the cluster"


def cluster_processes(nodes: LocalNodes | str) -> list[psutil.Process]:
    """The daemons that name the head port of ``nodes`` (or of an address), and what descends from them (not
    another cluster's)."""
    address = nodes if isinstance(nodes, str) else nodes.address
    named = re.compile(rf"[=:]{address.rsplit(':', 1)[1]}\b")
    found = {}
    for proc in psutil.process_iter(["cmdline"]):
        if named.search(" ".join(proc.info["cmdline"] or [])):
            found[proc.pid] = proc
            with contextlib.suppress(psutil.Error):
                found.update({child.pid: child for child in proc.children(recursive=True)})
    return list(found.values())


def titled(procs: list[psutil.Process], prefix: str) -> dict[int, psutil.Process]:
    """Those of ``procs`` whose title starts with ``prefix`` (and still run)."""
    out = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if proc.name().startswith(prefix):
                out[proc.pid] = proc
    return out


def test_a_cluster_ends_with_the_process_that_started_it_and_leaves_another_running(cluster: LocalNodes) -> None:
    """Tests and benchmarks start clusters side by side. One whose owner is SIGKILLed (no ``stop()``, which the
    module's cluster runs at its end) goes with it, and ends its processes only (not as ``ray stop``, which ends
    every Ray of the user)."""
    owner = subprocess.Popen(
        [sys.executable, "-c", "from vecfast.cluster.local_nodes import LocalNodes\n"
         "nodes = LocalNodes(num_nodes=1, num_cpus=1)\nprint(nodes.address, flush=True)\ninput()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        mine = cluster_processes(owner.stdout.readline().strip())
        kept = cluster_processes(cluster)
    finally:
        owner.kill()
    owner.wait()
    assert any(p.name() == "gcs_server" for p in mine) and any(p.name() == "raylet" for p in mine)
    assert not psutil.wait_procs(mine, timeout=20)[1]
    assert all(p.is_running() for p in kept) and len(cluster_processes(cluster)) >= len(kept)


def action(env: int, step: int) -> int:
    return (env * 7 + step * 3) % 5 % 2


def trajectories(env, steps: int, on_step=None) -> dict[int, list[tuple]]:
    """Each env's first ``steps`` results (observation, reward, ends, restarted) under :func:`action`, stepped
    through ``send``/``recv`` in whatever batches the env returns."""
    env.async_reset(seed=0)
    counts = np.zeros(env.num_envs, dtype=int)
    records: dict[int, list[tuple]] = {j: [] for j in range(env.num_envs)}
    while counts.min() < steps:
        obs, rewards, terminated, truncated, info = env.recv()
        ids = np.asarray(info["env_id"])
        restarted = info.get("restarted", np.zeros(len(ids), bool)) & info.get("_restarted", np.zeros(len(ids), bool))
        for row, j in enumerate(ids.tolist()):
            records[j].append((obs[row].tolist(), float(rewards[row]), bool(terminated[row]), bool(truncated[row]),
                               bool(restarted[row])))  # fmt: skip
        env.send(np.array([action(j, counts[j]) for j in ids]), ids)
        counts[ids] += 1
        if on_step is not None:
            on_step(counts)
    return {j: records[j][:steps] for j in records}


def test_samplers_on_two_nodes_step_as_the_local_vector_env_does(cluster: LocalNodes, make_async) -> None:
    reference = make_async([functools.partial(__import__("gymnasium").make, "CartPole-v1")] * 8, num_workers=2,
                           batch_size=4)  # fmt: skip
    expected = trajectories(reference, 60)
    env = RemoteVectorEnv([MAKE, MAKE], cluster.address)
    try:
        assert env.num_envs == 8 and len({info.node_id for info in env.group.infos}) == 2  # one sampler per node
        assert trajectories(env, 60) == expected
        obs, info = env.reset(seed=0)  # gymnasium's API too: every env at once, in env order
        np.testing.assert_array_equal(obs[:, :1], np.array([[expected[j][0][0][0]] for j in range(8)]))
        obs, rewards, terminated, truncated, info = env.step(np.array([action(j, 0) for j in range(8)]))
        np.testing.assert_allclose(obs, np.array([expected[j][1][0] for j in range(8)]))
        assert rewards.tolist() == [1.0] * 8
    finally:
        env.close()


def test_a_killed_sampler_is_restarted_and_the_others_trajectories_do_not_change(cluster: LocalNodes) -> None:
    env = RemoteVectorEnv([MAKE, MAKE], cluster.address, max_restarts=1)
    try:
        expected = trajectories(env, 80)
        victim = psutil.Process(env.group.infos[1].pid)
        assert victim.name().startswith("ray::EnvSampler")  # the process title says what runs there
        workers = victim.children(recursive=True)
        killed = []

        def kill_once(counts: np.ndarray) -> None:
            if not killed and counts.min() >= 30:
                killed.append(time.monotonic())
                os.kill(victim.pid, signal.SIGKILL)

        got = trajectories(env, 80, kill_once)
        assert killed and len(env.restarts) == 1 and env.restarts[0].env_indices == (4, 5, 6, 7)
        for j in range(4):  # the other sampler's envs: the same data as without the failure
            assert got[j] == expected[j]
        for j in range(4, 8):  # each lost env ends its episode truncated, then a new one starts
            lost = [t for t, step in enumerate(got[j]) if step[4]]
            assert len(lost) == 1 and got[j][lost[0]][3], got[j][lost[0]]
            assert got[j][: lost[0]] == expected[j][: lost[0]]
        gone = psutil.wait_procs(workers, timeout=10)[1]
        assert not gone, f"the killed sampler's env workers outlived it: {gone}"
    finally:
        env.close()
    assert not [name for name in os.listdir("/dev/shm") if name.startswith(("vecfast", "psm_"))]


def train_cartpole_on_two_nodes(cluster: LocalNodes, run_dir: Path, inference: str, total_env_steps: int, **keys):
    """APPO on CartPole over both nodes, 4 envs per sampler, passing 195 (random play lasts ~22 steps); its metrics."""
    result = vecfast.train("CartPole-v1", algo="appo", total_env_steps=total_env_steps, run_dir=run_dir,
                           ray_address=cluster.address, num_samplers=2, num_workers=1, num_envs_per_worker=4,
                           sampler_inference=inference, seed=0, train_for_seconds=150, print_every_sec=None,
                           **keys)  # fmt: skip
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    best = max(r.get("mean_episode_return", 0.0) for r in records)
    assert best >= 195, f"best mean return {best} in {result.stats['env_steps']} env steps"
    return records


@pytest.mark.timeout(300)
def test_appo_learns_cartpole_with_samplers_on_two_nodes(
    cluster: LocalNodes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random play lasts ~22 steps; over two nodes APPO passes 195 as it does on one machine. The run is one as a
    local run is: evaluated while training, logged to TensorBoard and W&B (offline), and its run dir is evaluated
    and exported afterwards by this process alone. Local inference (the default for one policy): what a run does
    besides sampling does not depend on where the actions are computed."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from vecfast.cli import main

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    records = train_cartpole_on_two_nodes(cluster, run_dir, "local", 60_000, eval_every_env_steps=15_000,
                                          eval_episodes=2, with_wandb=True, wandb_project="vecfast-tests")  # fmt: skip
    config = json.loads((run_dir / "config.json").read_text())
    assert config["num_envs"] == 8 and config["config"]["ray_address"] == cluster.address
    assert [r for r in records if r.get("eval/episodes") == 2], "no evaluation while training"
    assert {"eval/mean_return", "mean_episode_return"} <= set(EventAccumulator(str(run_dir)).Reload().Tags()["scalars"])
    assert (run_dir / "wandb_run_id").exists() and list((run_dir / "wandb").glob("offline-run-*"))
    assert vecfast.evaluate(run_dir, episodes=3).episodes == 3
    assert main(["export", str(run_dir), "--out", str(tmp_path / "policy.onnx"), "--check", "32"]) == 0


@pytest.mark.timeout(300)
def test_appo_learns_cartpole_with_central_inference_on_two_nodes(cluster: LocalNodes, tmp_path: Path) -> None:
    """The learner acting for both nodes' envs (SEED RL): it passes 195 as local inference does (at ~25k env steps
    here, seed 0), so each action reached the env that asked for it; its policy lag is reported per batch."""
    records = train_cartpole_on_two_nodes(cluster, tmp_path / "run", "central", 40_000)
    assert "policy_lag_avg" in records[-1]


SAMPLER_CLASSES = {"central": "EnvSampler", "local": "PolicySampler"}


class SamplerKiller(threading.Thread):
    """SIGKILLs the first sampler process (``ray::<class>``) of ``cluster`` two seconds after the run at ``run_dir``
    wrote its first metrics; :meth:`alive` lists the samplers' processes there now."""

    def __init__(self, cluster: LocalNodes, run_dir: Path, sampler_class: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.run_dir, self.title = cluster, run_dir, f"ray::{sampler_class}"
        self.pids: list[int] = []
        self.start()

    def alive(self) -> list[int]:
        """The samplers' actor processes on this test's cluster (``ray::EnvSampler``, ``ray::EnvSampler.step``), not
        their env workers (forked from an actor, they inherit its title)."""
        samplers = titled(cluster_processes(self.cluster), self.title)  # (not another run's)
        return [pid for pid, p in samplers.items() if p.ppid() not in samplers]

    def all_gone(self, timeout: float = 20.0) -> bool:
        """Whether every sampler process is gone within ``timeout`` seconds (Ray ends a killed actor's process
        soon after the call, not during it)."""
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def run(self) -> None:
        deadline = time.monotonic() + 60
        metrics = self.run_dir / "metrics.jsonl"  # (opened with the run dir: empty until an iteration completed)
        while time.monotonic() < deadline and not (metrics.exists() and metrics.stat().st_size):
            time.sleep(0.2)
        time.sleep(2)
        self.pids.extend(self.alive())
        os.kill(self.pids[0], signal.SIGKILL)


def test_a_run_goes_on_when_a_sampler_dies_and_counts_the_restart(cluster: LocalNodes, tmp_path: Path) -> None:
    """Under local inference (central inference's healing: the connect-four game's test below)."""
    run_dir = tmp_path / "run"
    killer = SamplerKiller(cluster, run_dir, SAMPLER_CLASSES["local"])
    result = vecfast.train("CartPole-v1", algo="appo", total_env_steps=10**9, run_dir=run_dir,
                           ray_address=cluster.address, num_samplers=2, num_workers=1, num_envs_per_worker=4,
                           sampler_inference="local", seed=0, train_for_seconds=15,
                           print_every_sec=None)  # fmt: skip
    killer.join()
    assert result.stats["stopped_by"] == "train_for_seconds"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["restarts"] == 1
    assert len(killer.pids) == 2 and killer.all_gone(), "a sampler outlived its run"
    killed_at = next(i for i, r in enumerate(records) if r["restarts"])
    assert records[-1]["env_steps"] > records[killed_at]["env_steps"], "the run did not go on after the loss"
    # a batch's time between the samplers and the learner, beside its policy lag
    assert "policy_lag_avg" in records[-1] and any("time_batch_network" in r for r in records)
    assert all(0.0 <= r["time_batch_network"] < 5.0 for r in records if "time_batch_network" in r)
    assert not [name for name in os.listdir("/dev/shm") if name.startswith(("vecfast", "psm_"))]


def test_a_population_trains_and_resumes_on_ray_with_central_inference(cluster: LocalNodes, tmp_path: Path) -> None:
    """Populations act on the learner (central inference, what the default chooses for them): each policy rated
    and learning, and the run resumes from its checkpoint over the cluster as it does on one machine."""
    run_dir = tmp_path / "run"
    keys = {"ray_address": cluster.address, "num_samplers": 2, "num_workers": 1, "num_envs_per_worker": 4,
            "num_policies": 2, "seed": 0, "print_every_sec": None}  # fmt: skip
    first = vecfast.train("CartPole-v1", algo="appo", total_env_steps=4_000, run_dir=run_dir, **keys)
    again = vecfast.train("CartPole-v1", algo="appo", total_env_steps=8_000, run_dir=run_dir, resume=True, **keys)
    assert first.stats["env_steps"] >= 4_000 and again.stats["env_steps"] >= 8_000
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert {"policy_0_elo", "policy_1_elo", "policy_1_learning_rate"} <= set(records[-1])
    assert records[-1]["env_steps"] > first.stats["env_steps"]


@pytest.mark.parametrize("inference", ["central", "local"])
def test_past_its_restarts_a_lost_sampler_stops_the_run_with_a_checkpoint(
    cluster: LocalNodes, tmp_path: Path, inference: str
) -> None:
    run_dir = tmp_path / "run"
    killer = SamplerKiller(cluster, run_dir, SAMPLER_CLASSES[inference])
    with pytest.raises(WorkerDiedError, match=r"sampler \d \(envs \d to \d\) died and Ray did not restart it"):
        vecfast.train("CartPole-v1", algo="appo", total_env_steps=10**9, run_dir=run_dir, ray_address=cluster.address,
                      num_samplers=2, num_workers=1, num_envs_per_worker=4, sampler_inference=inference,
                      sampler_max_restarts=0, seed=0, train_for_seconds=60, print_every_sec=None)  # fmt: skip
    killer.join()
    assert list((run_dir / "checkpoints").glob("*.pt")), "no final checkpoint"
    assert killer.all_gone(), "a sampler outlived its run"


def test_connect_four_self_play_and_a_population_play_their_matches_on_two_nodes(
    cluster: LocalNodes, tmp_path: Path
) -> None:
    """A board game's matches on the samplers' nodes, the league (or the population) with the learner: the learner
    acts for every seat (central inference, the default's choice for a game), and the ratings come from matches
    played over the cluster."""
    keys = {"algo": "appo", "total_env_steps": 10**9, "ray_address": cluster.address, "num_samplers": 2,
            "num_envs_per_worker": 4, "seed": 0, "train_for_seconds": 12,
            "print_every_sec": None}  # fmt: skip
    vecfast.train("pettingzoo.classic.connect_four_v3", run_dir=tmp_path / "league", **keys)
    league = json.loads((tmp_path / "league" / "metrics.jsonl").read_text().splitlines()[-1])
    assert league["episodes"] > 0 and "elo" in league
    vecfast.train("pettingzoo.classic.connect_four_v3", run_dir=tmp_path / "population", num_policies=2, **keys)
    population = json.loads((tmp_path / "population" / "metrics.jsonl").read_text().splitlines()[-1])
    assert population["policy_0_elo"] != 1000.0 and population["policy_0_elo"] + population["policy_1_elo"] == (
        pytest.approx(2000.0)
    )


def test_a_game_goes_on_when_a_sampler_dies_mid_match(cluster: LocalNodes, tmp_path: Path) -> None:
    """A sampler SIGKILLed while its node plays connect four: its matches end (no result rated), Ray restarts it,
    and the league plays on over both nodes."""
    run_dir = tmp_path / "run"
    killer = SamplerKiller(cluster, run_dir, "EnvSampler")
    result = vecfast.train("pettingzoo.classic.connect_four_v3", algo="appo", total_env_steps=10**9, run_dir=run_dir,
                           ray_address=cluster.address, num_samplers=2, num_envs_per_worker=4, seed=0,
                           train_for_seconds=15, print_every_sec=None)  # fmt: skip
    killer.join()
    assert result.stats["stopped_by"] == "train_for_seconds"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["restarts"] == 1
    killed_at = next(i for i, r in enumerate(records) if r["restarts"])
    assert records[-1]["episodes"] > records[killed_at]["episodes"], "no match ended after the loss"
    assert killer.all_gone(), "a sampler outlived its run"
    assert not [name for name in os.listdir("/dev/shm") if name.startswith(("vecfast", "psm_"))]


def documented_listeners() -> dict[str, str]:
    """The table in the docs (Many machines) of what a Ray that vecfast starts listens on: each process named in
    its first column (in backquotes), and where it listens."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "training" / "many-machines.md").read_text()
    table = text.split("<!-- ray-listeners -->")[1].split("<!-- /ray-listeners -->")[0]
    listeners = {}
    for row in table.strip().splitlines()[2:]:
        process, where = row.strip("|").split("|")
        for name in re.findall(r"`([^`]+)`", process):
            listeners[name] = where.strip()
    return listeners


def test_a_local_ray_opens_what_the_docs_list_and_no_dashboard() -> None:
    """A Ray that vecfast starts (``ray_address="local"``): every listening socket of its processes belongs to a
    process the docs name, where it says (all interfaces, or the node's address); no dashboard (8265) and no
    Ray client server (10001)."""
    listed = documented_listeners()
    assert set(listed) >= {"gcs_server", "raylet", "python", "ray::EnvSampler", "ray::IDLE", "ray::RuntimeEnvAgent"}
    before = {p.pid for p in psutil.process_iter() if _is_ray_process(p)}  # another cluster's, if one runs
    env = RemoteVectorEnv([MAKE], "local")
    try:
        started = [p for p in psutil.process_iter() if _is_ray_process(p) and p.pid not in before]
        ray_pids = {p.pid for p in started} | {os.getpid()}
        sockets = [c for c in psutil.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN and c.pid]
        seen = set()
        for conn in sockets:
            if conn.pid not in ray_pids:
                continue
            name = "python" if conn.pid == os.getpid() else psutil.Process(conn.pid).name()
            kind = next((k for k in listed if name == k or name.startswith(k + ".")), None)
            assert kind is not None, f"{name} (pid {conn.pid}) listens on {conn.laddr}, which the docs do not list"
            everywhere = conn.laddr.ip in ("0.0.0.0", "::")
            assert everywhere == ("all interfaces" in listed[kind]), f"{name} listens on {conn.laddr.ip}"
            assert conn.laddr.port not in (8265, 10001)
            seen.add(kind)
        assert {"gcs_server", "raylet", "python", "ray::RuntimeEnvAgent"} <= seen
    finally:
        env.close()
    left = psutil.wait_procs(started, timeout=10)[1]
    assert not left, f"the Ray that the run started outlived it: {[p.name() for p in left]}"


def _is_ray_process(proc: psutil.Process) -> bool:
    try:
        return proc.name() in ("gcs_server", "raylet") or proc.name().startswith("ray::")
    except psutil.Error:
        return False


def test_what_samples_on_ray_is_said_before_ray_starts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"feed the asynchronous scheme \(algo='appo'\), not ppo"):
        vecfast.train("CartPole-v1", algo="ppo", run_dir=tmp_path / "a", ray_address="local")
    with pytest.raises(ValueError, match="seat the learner against its opponents: sampler_inference='central'"):
        vecfast.train("pettingzoo.classic.connect_four_v3", algo="appo", run_dir=tmp_path / "b", ray_address="local",
                      sampler_inference="local")  # fmt: skip
    with pytest.raises(ValueError, match="num_samplers must be an int >= 1"):
        vecfast.train("CartPole-v1", run_dir=tmp_path / "c", ray_address="local", num_samplers=0)
    with pytest.raises(ValueError, match="a sampler acts with one copy of one policy, not a population"):
        vecfast.train("CartPole-v1", algo="appo", run_dir=tmp_path / "d", ray_address="local", num_policies=2,
                      sampler_inference="local")  # fmt: skip
    with pytest.raises(ValueError, match=r"sampler_inference must be one of \('central', 'local'\)"):
        vecfast.train("CartPole-v1", algo="appo", run_dir=tmp_path / "e", ray_address="local", sampler_inference="x")
    assert not (tmp_path / "a").exists() and not ray.is_initialized()


def test_the_default_inference_is_local_for_one_policy_and_central_for_games_and_populations() -> None:
    from vecfast.trainers.config import TrainConfig
    from vecfast.trainers.run.env_source import EnvSource

    cartpole, game = EnvSource.of("CartPole-v1"), EnvSource.of("pettingzoo.classic.connect_four_v3")
    assert cartpole.sampler_inference(TrainConfig()) == "local"
    assert cartpole.sampler_inference(TrainConfig(num_policies=2)) == "central"
    assert game.sampler_inference(TrainConfig()) == "central"
    assert game.sampler_inference(TrainConfig(sampler_inference="local")) == "local"  # refused where it is checked
