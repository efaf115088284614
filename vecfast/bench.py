"""Env-step throughput of vecfast against the usual vector-env backends.

Every backend is measured the same way so that the numbers are comparable:
build it, pre-sample a pool of random action batches (sampling must not be
timed), warm up, then count env steps (batch steps x envs in the batch) for a
fixed wall time, and close it whatever happens. The scripts in ``benchmarks/``
time their envs with the same loop, :func:`run_for`, and its steppers.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import importlib.util
import itertools
import math
import multiprocessing
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import psutil
from gymnasium.vector.utils import batch_space

from vecfast.vector.worker import use_one_thread_per_library

if TYPE_CHECKING:  # rich (the train extra) is imported where a table or progress bar is drawn
    from rich.progress import Progress

StepFn = Callable[[], int]
"""Performs one batch step and returns how many env steps it did."""

ACTION_POOL_SIZE = 64
_TICK_S = 0.1  # how often the timing loop reports progress; rarely, to stay cheap


@dataclass(frozen=True)
class BenchConfig:
    """What to benchmark; shared by every backend so that they run the same envs."""

    env_id: str
    num_envs: int
    num_workers: int
    seconds: float = 10.0
    warmup: float = 1.0
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    rounds: int = 1
    """Passes over all backends; each backend reports its median over the passes."""

    @property
    def seconds_per_backend(self) -> float:
        """Warm-up and timed seconds of one backend over all rounds (its progress bar's length)."""
        return self.rounds * (self.warmup + self.seconds)

    @property
    def make_id(self) -> str:
        """The id for ``gym.make``, qualified so that it also resolves in spawned workers.

        VizDoom registers its ids on ``import vizdoom.gymnasium_wrapper``; a worker
        started with spawn/forkserver (SB3's default) has not imported it, but
        gymnasium imports ``module`` itself for ``module:EnvId`` ids.
        """
        if ":" not in self.env_id and self.env_id.startswith("Vizdoom"):
            return f"vizdoom.gymnasium_wrapper:{self.env_id}"
        return self.env_id

    @property
    def bare_id(self) -> str:
        """The id without its ``module:`` prefix (what other libraries call it)."""
        return self.env_id.rpartition(":")[2]

    @property
    def spec(self) -> gym.envs.registration.EnvSpec:
        """The registered spec; the ``module:`` prefix is imported first, as ``gym.make`` does."""
        module, _, name = self.make_id.rpartition(":")
        if module:
            importlib.import_module(module)
        return gym.spec(name)

    def make_env(self) -> gym.Env:
        """One env in this process."""
        return gym.make(self.make_id, **self.env_kwargs)

    def env_fns(self) -> list[Callable[[], gym.Env]]:
        """Picklable env constructors, so that subprocess backends can use any start method."""
        return [functools.partial(gym.make, self.make_id, **self.env_kwargs)] * self.num_envs


def default_num_workers(num_envs: int) -> int:
    """One worker per core, but never more workers than envs."""
    return max(1, min(os.cpu_count() or 1, num_envs))


# --- backends ---------------------------------------------------------------
# Each is a context manager yielding a StepFn and closing the env on exit.


def _action_cycle(space: gym.Space, seed: int) -> Iterator[Any]:
    """Endless cycle over pre-sampled actions, so that sampling stays out of the timing."""
    space.seed(seed)
    return itertools.cycle([space.sample() for _ in range(ACTION_POOL_SIZE)])


def batch_stepper(env: Any, actions: Iterable[Any], num_envs: int) -> StepFn:
    """StepFn for any env whose ``step`` takes a full batch: each call steps it with the next of
    ``actions`` (pre-sampled, e.g. an ``itertools.cycle``) and counts ``num_envs`` env steps."""
    pool = iter(actions)

    def step() -> int:
        env.step(next(pool))
        return num_envs

    return step


def recv_send_stepper(env: Any, actions: Iterable[Any]) -> StepFn:
    """StepFn for EnvPool's asynchronous API: take the envs that are ready, hand them the next of
    ``actions`` (one action per ready env) and count them."""
    pool = iter(actions)

    def step() -> int:
        *_, info = env.recv()
        env_ids = info["env_id"]
        env.send(next(pool), env_ids)
        return len(env_ids)

    return step


@contextlib.contextmanager
def _single(cfg: BenchConfig) -> Iterator[StepFn]:
    """One env in this process: the per-core cost that bounds every parallel backend.

    Its libraries get one thread, as in a vecfast worker (and, being process-wide, for the
    in-process backends measured after it).
    """
    with contextlib.closing(cfg.make_env()) as env:
        use_one_thread_per_library()
        env.reset(seed=cfg.seed)
        actions = _action_cycle(env.action_space, cfg.seed)

        def step() -> int:
            _, _, terminated, truncated, _ = env.step(next(actions))
            if terminated or truncated:
                env.reset()
            return 1

        yield step


@contextlib.contextmanager
def _gym_vector_env(
    cfg: BenchConfig, make: Callable[[list[Callable[[], gym.Env]]], gym.vector.VectorEnv]
) -> Iterator[StepFn]:
    """Any ``gymnasium.vector.VectorEnv``; these autoreset, so stepping is all there is."""
    with contextlib.closing(make(cfg.env_fns())) as env:
        env.reset(seed=cfg.seed)
        yield batch_stepper(env, _action_cycle(env.action_space, cfg.seed), env.num_envs)


def _gym_sync(cfg: BenchConfig) -> contextlib.AbstractContextManager[StepFn]:
    return _gym_vector_env(cfg, gym.vector.SyncVectorEnv)


def _gym_async(cfg: BenchConfig) -> contextlib.AbstractContextManager[StepFn]:
    return _gym_vector_env(cfg, functools.partial(gym.vector.AsyncVectorEnv, shared_memory=True))


def _vecfast(cfg: BenchConfig) -> contextlib.AbstractContextManager[StepFn]:
    from vecfast import AsyncSharedMemVectorEnv

    return _gym_vector_env(cfg, functools.partial(AsyncSharedMemVectorEnv, num_workers=cfg.num_workers))


def _batched(cfg: BenchConfig) -> contextlib.AbstractContextManager[StepFn]:
    """The env's own batched implementation (its ``vector_entry_point``): one simulator steps every env."""
    return _gym_vector_env(
        cfg,
        lambda fns: gym.make_vec(
            cfg.make_id, num_envs=len(fns), vectorization_mode="vector_entry_point", **cfg.env_kwargs
        ),
    )


def _no_vector_entry_point(cfg: BenchConfig) -> str | None:
    return None if cfg.spec.vector_entry_point else "env has no vector_entry_point"


@contextlib.contextmanager
def _vecfast_async(cfg: BenchConfig) -> Iterator[StepFn]:
    """Sample Factory double buffering: one half steps in the workers while the caller acts on the other."""
    from vecfast import AsyncSharedMemVectorEnv

    half = max(1, cfg.num_envs // 2)
    env = AsyncSharedMemVectorEnv(cfg.env_fns(), num_workers=cfg.num_workers, double_buffered=True, batch_size=half)
    with contextlib.closing(env):
        env.async_reset(seed=cfg.seed)
        yield recv_send_stepper(env, _action_cycle(batch_space(env.single_action_space, half), cfg.seed))


@contextlib.contextmanager
def _sb3(cfg: BenchConfig) -> Iterator[StepFn]:
    """SB3's SubprocVecEnv, started with fork where there is one.

    Its default, forkserver, has every worker import torch anew (about 1 s of CPU
    each: over a minute for 64 envs on 2 cores); the start method does not change
    the stepping that is timed.
    """
    from stable_baselines3.common.vec_env import SubprocVecEnv

    start_method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    with contextlib.closing(SubprocVecEnv(cfg.env_fns(), start_method=start_method)) as env:
        env.seed(cfg.seed)
        env.reset()
        yield batch_stepper(env, _action_cycle(batch_space(env.action_space, cfg.num_envs), cfg.seed), cfg.num_envs)


@contextlib.contextmanager
def _envpool(cfg: BenchConfig) -> Iterator[StepFn]:
    import envpool

    env = envpool.make_gymnasium(cfg.bare_id, num_envs=cfg.num_envs, seed=cfg.seed)
    with contextlib.closing(env):
        env.reset()
        yield batch_stepper(env, _action_cycle(batch_space(env.action_space, cfg.num_envs), cfg.seed), cfg.num_envs)


def _puffer_batch_size(cfg: BenchConfig, asynchronous: bool) -> int:
    """Every env in one batch for its synchronous step; half of them, as in vecfast's double buffering, for async."""
    return max(1, cfg.num_envs // 2) if asynchronous else cfg.num_envs


def _puffer_recv_send_stepper(env: Any, actions: Iterator[Any]) -> StepFn:
    """StepFn for PufferLib's asynchronous API: take the next batch of ready envs, hand it the next of
    ``actions`` (its ``send`` takes no env ids: the batch is the one ``recv`` returned) and count it."""

    def step() -> int:
        _, _, _, _, _, _, agent_ids, _ = env.recv()
        env.send(next(actions))
        return len(agent_ids)

    return step


@contextlib.contextmanager
def _puffer(cfg: BenchConfig, asynchronous: bool = False) -> Iterator[StepFn]:
    """PufferLib's Multiprocessing backend over gymnasium envs wrapped as its docs say (GymnasiumPufferEnv).

    ``overwork`` lets it run vecfast's worker count: it refuses more workers than physical
    cores, vecfast defaults to one per logical core. Its workers and ``recv`` busy-wait on
    shared flags, so where no core is spare they contend with each other for the CPUs.
    """
    import pufferlib.emulation
    import pufferlib.vector

    batch = _puffer_batch_size(cfg, asynchronous)
    creator = functools.partial(
        pufferlib.emulation.GymnasiumPufferEnv, env_creator=gym.make, env_args=[cfg.make_id], env_kwargs=cfg.env_kwargs
    )
    env = pufferlib.vector.make(
        creator,
        backend=pufferlib.vector.Multiprocessing,
        num_envs=cfg.num_envs,
        num_workers=cfg.num_workers,
        batch_size=batch,
        overwork=True,
        seed=cfg.seed,
    )
    try:
        actions = _action_cycle(batch_space(env.single_action_space, batch), cfg.seed)
        if asynchronous:
            env.async_reset(cfg.seed)
            yield _puffer_recv_send_stepper(env, actions)
        else:
            env.reset(seed=cfg.seed)
            yield batch_stepper(env, actions, batch)
    finally:
        _close_puffer(env)


def _close_puffer(env: Any) -> None:
    """Close the envs in PufferLib's workers, then the workers.

    Its ``close`` only terminates the workers, which orphans the envs' own processes:
    VizDoom's games outlive them, ignore SIGTERM and keep the caller's stdout open. Each
    worker closes its envs on the CLOSE command (which nothing in PufferLib sends) once it
    is idle, and answers None after the infos it may still owe.
    """
    from pufferlib.vector import CLOSE, MAIN

    semaphores = env.buf["semaphores"]
    for worker, (process, pipe) in enumerate(zip(env.processes, env.recv_pipes, strict=True)):
        while semaphores[worker] < MAIN and process.is_alive():  # still stepping its batch
            time.sleep(1e-4)
        semaphores[worker] = CLOSE
        with contextlib.suppress(EOFError):  # a worker that died has nothing left to close
            while pipe.recv() is not None:
                pass
    env.close()
    for process in env.processes:
        process.join()


def _puffer_unavailable(asynchronous: bool) -> Callable[[BenchConfig], str | None]:
    """PufferLib gives each worker the same number of envs and each batch whole workers."""

    def reason(cfg: BenchConfig) -> str | None:
        if importlib.util.find_spec("pufferlib") is None:
            return "pufferlib-core not installed"
        envs_per_worker, uneven = divmod(cfg.num_envs, cfg.num_workers)
        batch = _puffer_batch_size(cfg, asynchronous)
        if uneven or batch % envs_per_worker or cfg.num_envs % batch:
            return f"PufferLib cannot split {cfg.num_envs} envs into {cfg.num_workers} workers and batches of {batch}"
        return None

    return reason


def _installed(module: str) -> Callable[[BenchConfig], str | None]:
    return lambda cfg: None if importlib.util.find_spec(module) else f"{module} not installed"


def _envpool_unavailable(cfg: BenchConfig) -> str | None:
    if importlib.util.find_spec("envpool") is None:
        return "envpool not installed"
    if cfg.env_kwargs:
        return "gymnasium env kwargs do not carry over to EnvPool"
    import envpool

    return None if cfg.bare_id in envpool.list_all_envs() else "env not in EnvPool"


@dataclass(frozen=True)
class Backend:
    label: str
    run: Callable[[BenchConfig], contextlib.AbstractContextManager[StepFn]]
    unavailable: Callable[[BenchConfig], str | None] = lambda cfg: None
    """Why the backend cannot run here (it is then reported as n/a), or None."""


BACKENDS: dict[str, Backend] = {
    "single": Backend("single env", _single),
    "sync": Backend("gym SyncVectorEnv", _gym_sync),
    "async": Backend("gym AsyncVectorEnv", _gym_async),
    "sb3": Backend("SB3 SubprocVecEnv", _sb3, _installed("stable_baselines3")),
    "envpool": Backend("EnvPool", _envpool, _envpool_unavailable),
    "puffer": Backend("PufferLib step()", _puffer, _puffer_unavailable(asynchronous=False)),
    "puffer-async": Backend(
        "PufferLib async, 2 buffers",
        functools.partial(_puffer, asynchronous=True),
        _puffer_unavailable(asynchronous=True),
    ),
    "vecfast": Backend("vecfast step()", _vecfast),
    "vecfast-async": Backend("vecfast async, 2 buffers", _vecfast_async),
    "batched": Backend("batched (vector_entry_point)", _batched, _no_vector_entry_point),
}


# --- timing -----------------------------------------------------------------


def run_for(
    step: StepFn,
    seconds: float = math.inf,
    *,
    calls: int | None = None,
    on_tick: Callable[[float, int], None] | None = None,
) -> tuple[int, float]:
    """Call ``step`` until ``seconds`` of wall time have passed (at least once) or it was called
    ``calls`` times; return (env steps it counted, elapsed seconds).

    The one timing loop of ``vecfast bench`` and the scripts in ``benchmarks/``, so that their
    figures are measured alike: the clock is read after every call, and ``on_tick(seconds so
    far, env steps so far)`` runs every 0.1 s at most (rarely, to stay cheap).
    """
    if seconds == math.inf and calls is None:
        raise ValueError("run_for needs seconds or calls")
    steps = 0
    start = last_tick = now = time.perf_counter()
    for _ in itertools.repeat(None) if calls is None else range(calls):
        steps += step()
        now = time.perf_counter()
        if now - last_tick >= _TICK_S and on_tick is not None:
            on_tick(now - start, steps)
            last_tick = now
        if now - start >= seconds:
            break
    return steps, now - start


def cpu_seconds(procs: Iterable[psutil.Process]) -> float:
    """User plus system CPU time of this process and ``procs`` (its workers, listed before the
    timing starts so that both readings cover the same processes).

    CPU time per step stays meaningful where wall-time rates suffer from other jobs on the machine.
    """
    return process_cpu_seconds(psutil.Process()) + sum(map(process_cpu_seconds, procs))


def process_cpu_seconds(proc: psutil.Process) -> float:
    """User plus system CPU time of one process; 0 for one that is gone."""
    with contextlib.suppress(psutil.Error):
        times = proc.cpu_times()
        return times.user + times.system
    return 0.0


def measure(
    backend: Backend, cfg: BenchConfig, on_tick: Callable[[float, float | None], None] = lambda t, r: None
) -> float:
    """Steps/s of one backend after warm-up; ``on_tick(seconds done, steps/s or None)``."""
    with backend.run(cfg) as step:
        run_for(step, cfg.warmup, on_tick=lambda t, _: on_tick(t, None))
        steps, elapsed = run_for(step, cfg.seconds, on_tick=lambda t, n: on_tick(cfg.warmup + t, n / t))
    return steps / elapsed


@contextlib.contextmanager
def _scratch_cwd() -> Iterator[str]:
    """Run in a fresh temporary directory.

    VizDoom writes ``./_vizdoom/`` and ``./_vizdoom.ini`` into the cwd, and games
    starting at the same moment race on creating that directory; a private cwd
    keeps the user's directory clean and isolates concurrent benchmarks.
    """
    old = os.getcwd()
    path = tempfile.mkdtemp(prefix="vecfast-bench-")
    os.chdir(path)
    try:
        yield path
    finally:
        os.chdir(old)
        shutil.rmtree(path, ignore_errors=True)


class EnvSetupError(RuntimeError):
    """The env cannot even be made once in this process (bad id or kwargs): nothing to measure."""


def _probe(cfg: BenchConfig) -> None:
    """Make, reset and close one env: fails fast on a bad id before spawning N processes.

    It also lets the env create its files in the cwd (VizDoom's ``_vizdoom/``)
    before parallel copies race on them.
    """
    try:
        with contextlib.closing(cfg.make_env()) as env:
            env.reset(seed=cfg.seed)
    except Exception as exc:
        raise EnvSetupError(f"cannot make {cfg.env_id!r}: {type(exc).__name__}: {exc}") from exc


# --- results ----------------------------------------------------------------

BACKEND_GROUPS = {"gymnasium": ("sync", "async")}
"""Names that ``--only`` takes for several backends."""

BASELINES = {"limit": "physical", "async": "async", "sync": "sync"}
"""Ratio columns: header -> backend (``physical`` is single x num_workers)."""


@dataclass
class BenchReport:
    config: BenchConfig
    backends: list[str]
    """Measured backends, in table order."""
    per_round: dict[str, list[float]] = field(default_factory=dict)
    """Per backend, steps/s of each round, in order; its rate is their median."""
    errors: dict[str, str] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    """Why a backend could not run here (reported as n/a)."""
    host: dict[str, Any] = field(default_factory=lambda: _host_info())
    """Taken when the run starts: ``cpu_busy_pct`` says whether others competed for the CPUs."""

    def rate(self, name: str) -> float | None:
        """Median steps/s over the rounds; None where the backend was n/a or failed."""
        if name == "physical":
            single = self.rate("single")
            return None if single is None else single * self.config.num_workers
        rates = self.per_round.get(name)
        return None if not rates or name in self.errors else statistics.median(rates)

    def ratio(self, name: str, baseline: str) -> float | None:
        rate, base = self.rate(name), self.rate(baseline)
        return None if rate is None or not base else rate / base

    def rows(self) -> list[str]:
        """Backends in table order, with the derived physical limit after the single env."""
        names = list(self.backends)
        if "single" in names:
            names.insert(names.index("single") + 1, "physical")
        return names

    def label(self, name: str) -> str:
        if name == "physical":
            return f"physical limit (x{self.config.num_workers})"
        return BACKENDS[name].label

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config),
            "host": self.host,
            "results": [
                {
                    "backend": name,
                    "label": self.label(name),
                    "steps_per_sec": self.rate(name),
                    "rounds": self.per_round.get(name, []),
                    **{f"vs_{b}": self.ratio(name, b) for b in BASELINES.values()},
                    "error": self.errors.get(name),
                    "unavailable": self.unavailable.get(name),
                }
                for name in self.rows()
            ],
        }


def _host_info() -> dict[str, Any]:
    versions = {}
    for dist in ("vecfast", "gymnasium", "numpy", "stable-baselines3", "envpool", "pufferlib-core", "vizdoom"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[dist] = importlib.metadata.version(dist)
    return {
        "cpu_count": os.cpu_count(),
        "cpu_busy_pct": psutil.cpu_percent(interval=0.5),  # others' load: this process sleeps meanwhile
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
    }


@dataclass(frozen=True)
class TableText:
    """A report's table as text cells, for rich or for plain text."""

    title: str
    caption: str
    header: list[str]
    rows: list[list[str]]
    derived: list[bool]  # per row: derived from another (the physical limit), not measured


def table_text(report: BenchReport) -> TableText:
    cfg = report.config
    rows = []
    for name in report.rows():
        rate = "error" if name in report.errors else _fmt(report.rate(name), "{:,.0f}")
        rows.append([report.label(name), rate, *[_fmt(report.ratio(name, b), "{:.2f}x") for b in BASELINES.values()]])
    return TableText(
        title=f"{cfg.env_id}: {cfg.num_envs} envs, {cfg.num_workers} workers, {cfg.seconds:g} s each"
        + (f", median of {cfg.rounds} interleaved rounds" if cfg.rounds > 1 else ""),
        caption=f"limit = single env x {cfg.num_workers}; async, sync = gymnasium's",
        header=["backend", "steps/s", *[f"vs {header}" for header in BASELINES]],
        rows=rows,
        derived=[name == "physical" for name in report.rows()],
    )


def print_table(report: BenchReport) -> None:
    """The report's table on stdout: drawn by rich where it is installed, else as aligned plain text."""
    text = table_text(report)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # the lean install
        widths = [max(len(row[i]) for row in [text.header, *text.rows]) for i in range(len(text.header))]
        print(text.title)
        for row in [text.header, *text.rows]:
            cells = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]
            print("  ".join(cells).rstrip())
        print(text.caption)
        return
    table = Table(title=text.title, caption=text.caption)
    for i, header in enumerate(text.header):
        table.add_column(header, justify="left" if i == 0 else "right")
    for row, derived in zip(text.rows, text.derived, strict=True):
        cells = [f"[red]{c}[/red]" if c == "error" else c for c in row]
        table.add_row(*cells, style="italic dim" if derived else None)
    Console().print(table)


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else spec.format(value)


# --- driver -----------------------------------------------------------------


class RichProgress:
    """The benchmark's progress as rich's bars (on stderr): a bar per backend with its latest rate."""

    def __init__(self, total: float) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

        self.total = total
        columns = (SpinnerColumn(), TextColumn("{task.description:<25}"), BarColumn())
        columns += (TextColumn("{task.fields[status]}"),)
        self.progress: Progress = Progress(*columns, console=Console(stderr=True))
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> RichProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def note(self, text: str) -> None:
        self.progress.console.print(f"[yellow]{text}")

    def add(self, name: str, label: str) -> None:
        self.tasks[name] = self.progress.add_task(label, total=self.total, status="[dim]waiting")

    def show(self, name: str, completed: float, status: str, style: str | None = None, final: bool = False) -> None:
        from rich.markup import escape

        shown = escape(status) if style is None else f"[{style}]{escape(status)}"
        self.progress.update(self.tasks[name], completed=completed, status=shown)


class PlainProgress:
    """The benchmark's progress as plain lines on stderr, each backend's results only: where rich is not
    installed (the lean install)."""

    def __init__(self, total: float) -> None:
        self.labels: dict[str, str] = {}

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def note(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def add(self, name: str, label: str) -> None:
        self.labels[name] = label

    def show(self, name: str, completed: float, status: str, style: str | None = None, final: bool = False) -> None:
        if final:
            print(f"{self.labels[name]:<25} {status}", file=sys.stderr, flush=True)


def run_benchmark(cfg: BenchConfig, backends: Sequence[str], plain: bool | None = None) -> BenchReport:
    """Measure ``backends`` (names from BACKENDS) one after another, ``cfg.rounds`` times over, with a progress bar
    (rich's; plain lines where ``plain`` or where rich is not installed).

    Rounds interleave the backends (A B C, A B C, ...) so that a change in the machine's load
    during the run shifts every backend's median alike instead of skewing the ratios. A
    backend that raises is reported as failed (and not run again) instead of losing the
    others' results.
    """
    unknown = set(backends) - BACKENDS.keys()
    if unknown:
        raise ValueError(f"unknown backends {sorted(unknown)}; choose from {list(BACKENDS)}")
    backends = [name for name in BACKENDS if name in backends]  # same row order in every table
    report = BenchReport(cfg, backends)
    total = cfg.seconds_per_backend
    if plain is None:
        plain = importlib.util.find_spec("rich") is None
    with _scratch_cwd(), (PlainProgress if plain else RichProgress)(total) as progress:
        busy = report.host["cpu_busy_pct"]
        if busy > 20:
            progress.note(f"note: the CPUs were {busy:.0f}% busy before the start: results will be skewed")
        _probe(cfg)
        for name in backends:
            progress.add(name, BACKENDS[name].label)
        for name in backends:
            reason = BACKENDS[name].unavailable(cfg)
            if reason is not None:
                report.unavailable[name] = reason
                progress.show(name, total, f"n/a ({reason})", "dim", final=True)
        for round_index in range(cfg.rounds):
            for name in backends:
                if name in report.unavailable or name in report.errors:
                    continue
                _measure_round(report, name, round_index, progress)
    return report


def _measure_round(report: BenchReport, name: str, round_index: int, progress: RichProgress | PlainProgress) -> None:
    cfg = report.config
    offset = round_index * (cfg.warmup + cfg.seconds)
    progress.show(name, offset, "starting")

    def on_tick(done: float, rate: float | None) -> None:
        progress.show(name, offset + done, "warming up" if rate is None else f"{rate:,.0f} steps/s")

    try:
        rate = measure(BACKENDS[name], cfg, on_tick)
    except Exception as exc:  # keep the other backends' results
        report.errors[name] = f"{type(exc).__name__}: {exc}"
        progress.show(name, cfg.seconds_per_backend, f"failed: {report.errors[name]}", "red", final=True)
        return
    rates = report.per_round.setdefault(name, [])
    rates.append(rate)
    done = "" if len(rates) == cfg.rounds else f" (round {len(rates)}/{cfg.rounds})"
    progress.show(name, offset + cfg.warmup + cfg.seconds, f"{report.rate(name):,.0f} steps/s{done}", "green", True)
