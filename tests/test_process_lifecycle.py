"""Process lifecycle: dead workers are detected, hanging envs time out, and no process or
/dev/shm entry outlives the vector env, however it (or its owner) ends.

Bounds on detection times are deliberately loose (liveness, not performance), and every
test has a pytest-timeout so that a regression hangs nothing.
"""

from __future__ import annotations

import functools
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from envs_for_tests import StopsBeforeSendingEnv, env_fns, faulty_env_fns, vizdoom_basic
from helpers import describe, shm_entries, shm_files_used_by, unlink_shm, vizdoom_instance_id, wait_gone

from vecfast.vector import StartTimeoutError, StepTimeoutError, WorkerDiedError
from vecfast.vector.shared_buffers import portable_shared_memory

TESTS_DIR = Path(__file__).resolve().parent
REPO_DIR = TESTS_DIR.parent
LIVENESS_BOUND_S = 5.0  # loose: detection is specified as "well under a second"

# 5 envs over 2 workers: worker 0 has envs 0-2, worker 1 has envs 3-4.
NUM_ENVS = 5
NUM_WORKERS = 2
ACTIONS = np.zeros((NUM_ENVS, 2), np.float32)


def all_descendants(vec) -> list[psutil.Process]:
    """The vector env's workers and every process they started."""
    procs = []
    for pid in vec.worker_pids:
        proc = psutil.Process(pid)
        procs += [proc, *proc.children(recursive=True)]
    return procs


def assert_all_gone(procs, timeout=LIVENESS_BOUND_S):
    left = wait_gone(procs, timeout)
    assert left == [], f"processes still running: {describe(left)}"


# ---------------------------------------------------------------------------- dead workers


@pytest.mark.timeout(30)
@pytest.mark.parametrize("during", ["step", "recv", "reset", "call"])
def test_sigkilled_worker_is_detected(make_async, during):
    vec = make_async(env_fns(NUM_ENVS, child_process=True), num_workers=NUM_WORKERS, batch_size=2)
    vec.reset(seed=0)
    procs = all_descendants(vec)
    assert len(procs) == NUM_WORKERS + NUM_ENVS  # each env owns one `sleep` child
    victim = vec.processes[1]
    os.kill(victim.pid, signal.SIGKILL)
    assert_all_gone([psutil.Process(victim.pid)])  # dead (a zombie) before the vector env is used

    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as caught:
        if during == "step":
            vec.step(ACTIONS)
        elif during == "recv":
            vec.send(ACTIONS[:3], [2, 3, 4])
            vec.recv()
            vec.recv()
        elif during == "reset":
            vec.reset(seed=1)
        else:
            vec.call("scaled_state", 2)
    assert time.monotonic() - start < LIVENESS_BOUND_S
    message = str(caught.value)
    assert "worker 1" in message and "SIGKILL" in message and str(victim.pid) in message

    vec.close()
    # The killed worker's `sleep` children were re-parented; close() must still reach them.
    assert_all_gone(procs)


@pytest.mark.timeout(30)
def test_calls_after_a_worker_died_raise_instead_of_hanging(make_async):
    vec = make_async(env_fns(NUM_ENVS), num_workers=NUM_WORKERS)
    vec.reset(seed=0)
    procs = all_descendants(vec)
    os.kill(vec.worker_pids[0], signal.SIGKILL)
    with pytest.raises(WorkerDiedError):
        vec.step(ACTIONS)
    for call in (lambda: vec.step(ACTIONS), lambda: vec.reset(seed=0), lambda: vec.get_attr("index")):
        with pytest.raises(RuntimeError, match="close"):
            call()
    vec.close()
    assert_all_gone(procs)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("fault", "how"), [("segfault", "SIGSEGV"), ("exit", "exit code 3")])
def test_worker_dying_inside_an_env_is_detected(make_async, fault, how):
    fns = faulty_env_fns(NUM_ENVS, 4, fault, fault_at=3, terminate_prob=0.0, time_limit=False)
    vec = make_async(fns, num_workers=NUM_WORKERS)
    vec.reset(seed=0)
    vec.step(ACTIONS)
    vec.step(ACTIONS)
    procs = all_descendants(vec)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError, match=how) as caught:
        vec.step(ACTIONS)
    assert time.monotonic() - start < LIVENESS_BOUND_S
    assert "worker 1" in str(caught.value)
    vec.close()
    assert_all_gone(procs)


@pytest.mark.timeout(30)
def test_close_after_an_undetected_worker_death(make_async):
    vec = make_async(env_fns(NUM_ENVS, child_process=True), num_workers=NUM_WORKERS)
    vec.reset(seed=0)
    procs = all_descendants(vec)
    os.kill(vec.worker_pids[0], signal.SIGKILL)
    vec.close()
    assert_all_gone(procs)


@pytest.mark.timeout(30)
def test_close_releases_every_process(make_async):
    vec = make_async(env_fns(NUM_ENVS, child_process=True), num_workers=NUM_WORKERS)
    vec.reset(seed=0)
    vec.step(ACTIONS)
    procs = all_descendants(vec)
    children = set(vec.get_attr("child_pid"))
    assert children <= {p.pid for p in procs} and len(children) == NUM_ENVS
    vec.close()
    assert_all_gone(procs)
    assert [p.exitcode for p in vec.processes] == [0] * NUM_WORKERS  # they closed, nobody killed them


@pytest.mark.timeout(60)
def test_sigkilled_vizdoom_worker_leaves_no_game_and_no_shm_after_close(make_async, tmp_path, monkeypatch):
    monkeypatch.chdir(vizdoom_cwd(tmp_path))
    shm_before = shm_entries()
    vec = make_async([vizdoom_basic] * 4, num_workers=2)
    vec.reset(seed=0)
    vec.step(np.zeros(4, np.int64))
    procs = all_descendants(vec)
    games = [p for p in procs if vizdoom_instance_id(p) is not None]
    assert len(games) == 4
    ours = shm_files_used_by(procs)
    try:
        os.kill(vec.worker_pids[0], signal.SIGKILL)
        with pytest.raises(WorkerDiedError):
            vec.step(np.zeros(4, np.int64))
        vec.close()
        assert_all_gone(procs)
        leaked = (shm_entries() - shm_before) & ours
        assert leaked == set(), f"/dev/shm entries left behind: {sorted(leaked)}"
    finally:
        unlink_shm((shm_entries() - shm_before) & ours)


# ---------------------------------------------------------------------------- step_timeout


@pytest.mark.timeout(30)
@pytest.mark.parametrize("api", ["step", "recv"])
def test_step_timeout_names_the_hanging_env(make_async, api):
    timeout = 1.0
    vec = make_async(
        faulty_env_fns(NUM_ENVS, 4, "hang", fault_at=2, child_process=True, terminate_prob=0.0, time_limit=False),
        num_workers=NUM_WORKERS,
        step_timeout=timeout,
        batch_size=NUM_ENVS,
    )
    vec.reset(seed=0)
    vec.step(ACTIONS)
    procs = all_descendants(vec)

    start = time.monotonic()
    with pytest.raises(StepTimeoutError) as caught:
        if api == "step":
            vec.step(ACTIONS)
        else:
            vec.send(ACTIONS)
            vec.recv()
    elapsed = time.monotonic() - start
    assert timeout <= elapsed < timeout + LIVENESS_BOUND_S
    assert "env 4" in str(caught.value) and "worker 1" in str(caught.value)
    assert isinstance(caught.value, TimeoutError)

    with pytest.raises(RuntimeError, match="this vector env cannot continue"):
        vec.step(ACTIONS)  # refused at once, rather than waiting on the hung env again
    start = time.monotonic()
    vec.close()
    assert time.monotonic() - start < LIVENESS_BOUND_S + 1
    assert_all_gone(procs)


@pytest.mark.timeout(60)
def test_a_stopped_worker_is_caught_while_the_others_keep_recv_busy(make_async):
    """Old behaviour: with double buffering, recv() kept returning the healthy worker's envs
    and never noticed that a SIGSTOPped worker had stopped stepping its own."""
    timeout = 1.0
    vec = make_async(env_fns(4, "box_f32"), num_workers=2, step_timeout=timeout, batch_size=1)
    actions = np.zeros((4, 2), np.float32)
    start = time.monotonic()  # before anything is sent: the victim's timer starts at its last send
    vec.async_reset(seed=0)
    victim = vec.processes[1]  # envs 2 and 3
    try:
        os.kill(victim.pid, signal.SIGSTOP)
        received = 0
        with pytest.raises(StepTimeoutError) as caught:
            while time.monotonic() - start < timeout + 3 * LIVENESS_BOUND_S:
                obs, *_, info = vec.recv()
                received += 1
                vec.send(actions[info["env_id"]], info["env_id"])
        elapsed = time.monotonic() - start
    finally:
        os.kill(victim.pid, signal.SIGCONT)
    assert timeout <= elapsed < timeout + LIVENESS_BOUND_S
    assert received > 10  # the healthy worker kept stepping in the meantime
    message = str(caught.value)
    assert "worker 1" in message and "env 2" in message and "stopped" in message
    vec.close()


@pytest.mark.timeout(60)
def test_a_worker_stopped_before_sending_its_results_is_caught(make_async):
    """Old behaviour: a worker stopped after publishing a step's statuses and before sending the message with
    the step's infos left recv() reading the pipe forever (it owed no env step, so the stall watch had nothing
    to time); a loaded machine stopped it there in the test above."""
    timeout = 1.0
    fns = [functools.partial(StopsBeforeSendingEnv, 0), functools.partial(StopsBeforeSendingEnv, 1, stop_at=1)]
    vec = make_async(fns, num_workers=2, step_timeout=timeout)
    vec.reset(seed=0)
    victim = vec.processes[1]  # env 1
    start = time.monotonic()
    try:
        with pytest.raises(StepTimeoutError) as caught:
            vec.step(np.zeros(2, np.int64))
        elapsed = time.monotonic() - start
    finally:
        os.kill(victim.pid, signal.SIGCONT)
    assert timeout <= elapsed < timeout + LIVENESS_BOUND_S
    message = str(caught.value)
    assert "worker 1" in message and "env 1" in message and "stopped" in message
    with pytest.raises(RuntimeError, match="this vector env cannot continue"):
        vec.step(np.zeros(2, np.int64))  # refused at once, rather than reading the pipe again
    vec.close()


@pytest.mark.timeout(60)
def test_a_hanging_env_constructor_times_out_and_leaves_no_process(make_async):
    """Old behaviour: no start_timeout; the constructor of the vector env waited forever."""
    fns = env_fns(4, "box_f32")
    fns[3] = functools.partial(time.sleep, 10_000)  # never returns an env
    before = set(psutil.Process().children(recursive=True))
    start = time.monotonic()
    with pytest.raises(StartTimeoutError) as caught:
        make_async(fns, num_workers=2, start_timeout=1.0)
    assert 1.0 <= time.monotonic() - start < 1.0 + LIVENESS_BOUND_S
    message = str(caught.value)
    assert "worker 1 (envs 2-3" in message and "worker 0" not in message and "start_timeout=1.0" in message
    assert isinstance(caught.value, TimeoutError)
    assert_all_gone(list(set(psutil.Process().children(recursive=True)) - before))


@pytest.mark.timeout(60)
def test_a_job_queued_behind_slow_steps_is_not_a_stall(make_async):
    """Progress is judged per env step started, not per job: a worker stepping many slow envs
    one after another, each well within step_timeout, never times out."""
    fns = env_fns(4, "box_f32", step_seconds=0.2, terminate_prob=0.0, time_limit=False)
    vec = make_async(fns, num_workers=1, step_timeout=0.5)
    vec.reset(seed=0)
    for _ in range(3):
        vec.step(ACTIONS[:4])
    vec.close()


@pytest.mark.timeout(30)
def test_slow_envs_within_step_timeout_are_fine(make_async, make_sync):
    fns = env_fns(NUM_ENVS, "box_f32")
    vec = make_async(fns, num_workers=NUM_WORKERS, step_timeout=30.0)
    sync = make_sync(fns)
    vec.reset(seed=0)
    sync.reset(seed=0)
    for _ in range(20):
        np.testing.assert_array_equal(vec.step(ACTIONS)[0], sync.step(ACTIONS)[0])


# ---------------------------------------------------------------------------- owner death

OWNER_SCRIPT = textwrap.dedent(
    """
    import functools, json, sys
    sys.path.insert(0, {tests_dir!r})
    sys.path.insert(0, {repo_dir!r})
    import numpy as np
    import psutil
    from vecfast import AsyncSharedMemVectorEnv
    import envs_for_tests

    scenario = {scenario!r}
    if scenario == "vizdoom":
        fns = [envs_for_tests.vizdoom_basic] * 4
    elif scenario == "hanging":
        fns = envs_for_tests.faulty_env_fns(4, 3, "hang", fault_at=1, child_process=True)
    else:
        fns = envs_for_tests.env_fns(4, child_process=True)
    env = AsyncSharedMemVectorEnv(fns, num_workers=2)
    env.reset(seed=0)
    env.action_space.seed(0)
    if scenario == "hanging":
        env.send(env.action_space.sample())  # env 3 never answers; its worker is stuck in step()
    else:
        for _ in range(5):
            env.step(env.action_space.sample())
    print(json.dumps([p.pid for p in psutil.Process().children(recursive=True)]), flush=True)
    command = sys.stdin.readline().strip()
    if command == "raise":
        raise RuntimeError("the owner crashes without closing its vector env")
    # "exit": leave without close(); anything else: wait here to be killed
    if command != "exit":
        sys.stdin.readline()
    """
)


def vizdoom_cwd(path: Path) -> Path:
    """A working directory for VizDoom games. VizDoom writes _vizdoom.ini and _vizdoom/ into
    the cwd; games started at the same moment race to create _vizdoom/ and the loser crashes
    ("Failed to create ./_vizdoom/ directory: File exists"), so it is created up front."""
    (path / "_vizdoom").mkdir(exist_ok=True)
    return path


@pytest.fixture
def owner_process(tmp_path, process_guard):
    """Start a script that owns a vector env: ``start(scenario)`` gives (process, its descendants,
    the /dev/shm names they use). Kills what is left and unlinks their /dev/shm entries after."""
    started: list[subprocess.Popen] = []
    ours: set[str] = set()
    shm_before = shm_entries()

    stderr_path = tmp_path / "owner_stderr.txt"
    stderr = stderr_path.open("w")

    def start(scenario: str):
        script = OWNER_SCRIPT.format(tests_dir=str(TESTS_DIR), repo_dir=str(REPO_DIR), scenario=scenario)
        proc = subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=vizdoom_cwd(tmp_path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        started.append(proc)
        line = proc.stdout.readline()
        if not line:
            code = proc.wait()
            stderr.flush()
            pytest.fail(f"the owner script failed (exit code {code}):\n{stderr_path.read_text()}")
        descendants = [psutil.Process(pid) for pid in json.loads(line)]
        process_guard.watch([psutil.Process(proc.pid), *descendants])
        shm_names = shm_files_used_by(descendants)  # what they map or name in /dev/shm
        ours.update(shm_names)
        return proc, descendants, shm_names

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    stderr.close()
    process_guard.cleanup()
    # Whatever our processes left behind (other processes on the machine may use /dev/shm too).
    unlink_shm((shm_entries() - shm_before) & ours)


OWNER_ENDINGS = ["SIGKILL", "SIGTERM", "SIGINT", "exit_without_close", "uncaught_exception"]
OWNER_CASES = [
    *[("child_processes", ending) for ending in OWNER_ENDINGS],
    *[("vizdoom", ending) for ending in OWNER_ENDINGS],
    # A worker stuck inside env.step() cannot read its job ring; its watchdog thread must act.
    # (Graceful endings would only wait close_timeout for it, then kill it: covered by close tests.)
    ("hanging", "SIGKILL"),
    ("hanging", "SIGTERM"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("scenario", "ending"), OWNER_CASES)
def test_owner_death_takes_every_descendant_down(owner_process, scenario, ending):
    shm_before = shm_entries()
    proc, descendants, ours = owner_process(scenario)
    tracker = portable_shared_memory()  # multiprocessing's resource tracker, which spawn starts, dies with it too
    expected = {"vizdoom": 2 + 4, "child_processes": 2 + 4, "hanging": 2 + 4}[scenario] + tracker
    assert len(descendants) == expected, describe(descendants)
    if scenario == "vizdoom":
        assert sum(vizdoom_instance_id(p) is not None for p in descendants) == 4

    if ending.startswith("SIG"):
        proc.send_signal(getattr(signal, ending))
    else:
        proc.stdin.write("exit\n" if ending == "exit_without_close" else "raise\n")
        proc.stdin.flush()
    proc.wait(timeout=30)

    assert_all_gone(descendants)
    leaked = (shm_entries() - shm_before) & ours
    assert leaked == set(), f"/dev/shm entries left behind: {sorted(leaked)}"


@pytest.mark.timeout(60)
def test_workers_start_after_the_owner_ran_opencv_threads(make_async):
    """Old behaviour: a worker forked after the owner had run OpenCV's thread pool (cv2.cvtColor on a
    frame, as a video writer does) hung in cv2.setNumThreads(1), and the constructor waited forever."""
    cv2 = pytest.importorskip("cv2")
    if mp.get_start_method() != "fork":
        pytest.skip("only forked workers inherit the owner's OpenCV state")
    frame = np.zeros((1000, 1000, 3), np.uint8)
    for _ in range(3):
        cv2.cvtColor(frame, cv2.COLOR_RGB2BGR)
    vec = make_async(env_fns(2, "box_f32"), num_workers=2, start_timeout=20.0)
    vec.reset(seed=0)
    vec.close()
