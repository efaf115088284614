"""Frozen past copies of a learning policy to play against, so self-play does not forget how to beat old strategies.

Playing only the latest policy chases its own tail (strategy cycles); playing only old copies stops being a
challenge. OpenAI Five drew the latest policy 80% of the time and a past snapshot 20%. A snapshot is taken
every ``snapshot_every_updates`` learner updates, or sooner once the learner's mean score against the past
snapshots over its last ``win_rate_games`` games reaches ``win_rate_threshold`` (it has outgrown them).

Which snapshot a game draws is ``sampling``: uniformly (OpenAI Five), or by AlphaStar's prioritized fictitious
self-play (PFSP) on the learner's win rate ``x`` against each (its mean score over its last ``win_rate_games`` games
against that snapshot, a fresh one counting as even): ``"pfsp_hard"`` weighs a snapshot by ``(1 - x) ** exponent``,
so the opponents that still beat the learner come back until it has learnt to punish them; ``"pfsp_var"`` by
``x (1 - x)``, the opponents it is even with. The latest policy keeps its ``latest_probability`` of the games.

The pool keeps at most ``max_snapshots``: past it, the snapshot the learner beats most (by that win rate; the oldest
among equals) leaves, so that a run of days holds a bounded pool in memory and in its checkpoints, made of the
opponents that still test it.

Snapshots are weights, not modules: files in ``directory`` (``torch.save(state_dict)``, read back with
``weights_only=True``) or CPU tensors in memory. Only the ``max_loaded`` most recently drawn are built into
modules (by the caller's ``model_factory``), so a pool of hundreds costs disk or host memory, not GPU memory.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from vecfast.selfplay.elo import Elo

OPPONENT_SAMPLINGS = ("uniform", "pfsp_hard", "pfsp_var")


def pfsp_weights(win_rates: np.ndarray, sampling: str, exponent: float = 2.0) -> np.ndarray:
    """The draw probabilities of opponents against which the learner's win rates are ``win_rates``, by
    ``sampling`` (see the module docstring); uniform where every weight is 0 (the learner beats them all)."""
    if sampling == "pfsp_hard":
        weights = (1.0 - win_rates) ** exponent
    elif sampling == "pfsp_var":
        weights = win_rates * (1.0 - win_rates)
    else:
        weights = np.ones_like(win_rates)
    total = weights.sum()
    return weights / total if total > 0 else np.full(len(win_rates), 1.0 / len(win_rates))


@dataclass(frozen=True)
class Snapshot:
    """A frozen copy of the learner, taken after update ``update`` because of ``reason``: ``"every_updates"``,
    ``"win_rate"`` or ``"requested"`` (:meth:`SnapshotPool.snapshot` called directly)."""

    name: str
    update: int
    reason: str


@dataclass(frozen=True)
class Opponent:
    """A drawn opponent: the learner itself (``latest``) or a snapshot of it. Its :attr:`model` is built when asked
    for: a caller that loads the weights into a module of its own (:meth:`SnapshotPool.weights`) builds none."""

    name: str
    latest: bool
    pool: SnapshotPool = field(repr=False, compare=False)

    @property
    def model(self) -> nn.Module:
        """The learner's live module, or the snapshot's frozen one (:meth:`SnapshotPool.model`)."""
        return self.pool.learner if self.latest else self.pool.model(self.name)


class SnapshotPool:
    """The snapshots of ``learner`` (named ``name``), who plays it next, and its results against them.

    Snapshots are named ``f"{name}@update{update}"``; with an ``elo``, each starts at the learner's rating
    and every :meth:`record`-ed game against one is rated.
    """

    def __init__(
        self,
        learner: nn.Module,
        model_factory: Callable[[], nn.Module],
        *,
        name: str = "policy_0",
        directory: str | Path | None = None,
        snapshot_every_updates: int | None = 100,
        win_rate_threshold: float | None = 0.7,
        win_rate_games: int = 100,
        latest_probability: float = 0.8,
        sampling: str = "uniform",
        pfsp_exponent: float = 2.0,
        max_loaded: int = 4,
        max_snapshots: int | None = None,
        elo: Elo | None = None,
        seed: int | None = None,
    ) -> None:
        if snapshot_every_updates is not None and snapshot_every_updates < 1:
            raise ValueError(f"snapshot_every_updates must be >= 1 or None, got {snapshot_every_updates}")
        if win_rate_threshold is not None and not 0.0 < win_rate_threshold <= 1.0:
            raise ValueError(f"win_rate_threshold must be in (0, 1] or None, got {win_rate_threshold}")
        if win_rate_games < 1:
            raise ValueError(f"win_rate_games must be >= 1, got {win_rate_games}")
        if not 0.0 <= latest_probability <= 1.0:
            raise ValueError(f"latest_probability must be in [0, 1], got {latest_probability}")
        if max_loaded < 1:
            raise ValueError(f"max_loaded must be >= 1, got {max_loaded}")
        if max_snapshots is not None and max_snapshots < 1:
            raise ValueError(f"max_snapshots must be >= 1 or None, got {max_snapshots}")
        if sampling not in OPPONENT_SAMPLINGS:
            raise ValueError(f"sampling must be one of {OPPONENT_SAMPLINGS}, got {sampling!r}")
        if pfsp_exponent <= 0:
            raise ValueError(f"pfsp_exponent must be > 0, got {pfsp_exponent}")
        self.learner, self.model_factory, self.name = learner, model_factory, name
        self.directory = None if directory is None else Path(directory)
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        self.snapshot_every_updates, self.win_rate_threshold = snapshot_every_updates, win_rate_threshold
        self.latest_probability, self.max_loaded, self.elo = latest_probability, max_loaded, elo
        self.max_snapshots = max_snapshots
        self.sampling, self.pfsp_exponent = sampling, pfsp_exponent
        self.rng = np.random.default_rng(seed)
        self.snapshots: dict[str, Snapshot] = {}  # by name, oldest first
        self._weights: dict[str, dict[str, torch.Tensor]] = {}  # in-memory snapshots (no directory)
        self._loaded: OrderedDict[str, nn.Module] = OrderedDict()  # built modules, least recently used first
        self._results: deque[float] = deque(maxlen=win_rate_games)  # the learner's last scores against snapshots
        self._scores: dict[str, deque[float]] = {}  # its last scores against each snapshot, by name
        self.draws: dict[str, int] = {}  # games drawn against each snapshot
        self._games_since_snapshot = 0  # how many of them the current pool has seen (the win rate's window)
        self.evicted: set[str] = set()  # snapshots that left the pool (games begun against them still end)
        self._last_snapshot_update = 0

    @property
    def loaded(self) -> list[str]:
        """The snapshots built into modules now, least recently used first."""
        return list(self._loaded)

    # ------------------------------------------------------------------ taking snapshots
    def on_update(self, update: int) -> Snapshot | None:
        """Call after every learner update (``update`` counts them); takes and returns a snapshot when one is due:
        ``snapshot_every_updates`` since the last, or the win rate at ``win_rate_threshold``."""
        every = self.snapshot_every_updates
        if every is not None and update - self._last_snapshot_update >= every:
            return self.snapshot(update, "every_updates")
        win_rate = self.win_rate()
        if self.win_rate_threshold is not None and win_rate is not None and win_rate >= self.win_rate_threshold:
            return self.snapshot(update, "win_rate")
        return None

    def snapshot(self, update: int, reason: str = "requested") -> Snapshot:
        """Freeze the learner's weights now. The win rate's window starts again: the pool has changed."""
        name = f"{self.name}@update{update}"
        if name in self.snapshots:
            raise ValueError(f"there is a snapshot {name!r} already")
        weights = {key: value.detach().to("cpu", copy=True) for key, value in self.learner.state_dict().items()}
        if self.directory is None:
            self._weights[name] = weights
        else:
            torch.save(weights, self._path(name))
        snapshot = Snapshot(name, update, reason)
        self.snapshots[name] = snapshot
        self._last_snapshot_update = update
        self._games_since_snapshot = 0
        if self.elo is not None:
            self.elo.add(name, self.elo.rating(self.name))
        while self.max_snapshots is not None and len(self.snapshots) > self.max_snapshots:
            self._evict(list(self.snapshots)[int(np.argmax(self.win_rates()))])
        return snapshot

    def _evict(self, name: str) -> None:
        """Snapshot ``name`` leaves the pool: its weights, file, module and books (its Elo rating stays)."""
        del self.snapshots[name]
        self._weights.pop(name, None)
        self._loaded.pop(name, None)
        self._scores.pop(name, None)
        self.draws.pop(name, None)
        if self.directory is not None:
            self._path(name).unlink(missing_ok=True)
        self.evicted.add(name)

    # ------------------------------------------------------------------ playing them
    def draw(self) -> Opponent:
        """The next opponent: with probability ``1 - latest_probability`` (once there is one) a snapshot drawn by
        ``sampling`` (:meth:`draw_probabilities`), else the latest policy."""
        if self.snapshots and self.rng.random() >= self.latest_probability:
            names = list(self.snapshots)
            if self.sampling == "uniform":  # (the generator's draws as they were before PFSP)
                name = names[int(self.rng.integers(len(names)))]
            else:
                name = names[int(self.rng.choice(len(names), p=self.draw_probabilities()))]
            self.draws[name] = self.draws.get(name, 0) + 1
            return Opponent(name, latest=False, pool=self)
        return Opponent(self.name, latest=True, pool=self)

    def win_rates(self) -> np.ndarray:
        """The learner's win rate against each snapshot, oldest first: its mean score over its last
        ``win_rate_games`` games against it, pulled towards even by one game's worth (a fresh snapshot is 0.5)."""
        return np.array([(sum(self._scores.get(name, ())) + 0.5) / (len(self._scores.get(name, ())) + 1)
                         for name in self.snapshots])  # fmt: skip

    def games_played(self) -> np.ndarray:
        """How many of the learner's last ``win_rate_games`` games against each snapshot were played, oldest first."""
        return np.array([len(self._scores.get(name, ())) for name in self.snapshots])

    def draw_probabilities(self) -> np.ndarray:
        """How a drawn snapshot is chosen, oldest first (:func:`pfsp_weights` of :meth:`win_rates`)."""
        return pfsp_weights(self.win_rates(), self.sampling, self.pfsp_exponent)

    def model(self, name: str) -> nn.Module:
        """Snapshot ``name`` as a module in eval mode without gradients; built from its weights unless it is among
        the ``max_loaded`` most recently used, which evicts the least recently used."""
        if name in self._loaded:
            self._loaded.move_to_end(name)
            return self._loaded[name]
        module = self.model_factory()
        module.load_state_dict(self.weights(name))
        self._loaded[name] = module.eval().requires_grad_(False)
        while len(self._loaded) > self.max_loaded:
            self._loaded.popitem(last=False)
        return module

    def weights(self, name: str) -> dict[str, torch.Tensor]:
        """Snapshot ``name``'s state dict (on the CPU; read from disk with ``weights_only`` where the pool keeps
        its snapshots there), for a module the caller holds: building one through ``model_factory`` initialises
        every layer first."""
        if self.directory is None:
            return self._weights[name]
        return torch.load(self._path(name), map_location="cpu", weights_only=True)

    def record(self, opponent: str, score: float) -> None:
        """A game's result for the learner against ``opponent`` (a drawn :attr:`Opponent.name`): 1 win, 0.5 draw,
        0 loss. Games against the latest policy (itself) count neither in the win rate nor in Elo."""
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"a score is in [0, 1] (1 win, 0.5 draw, 0 loss), got {score!r}")
        if opponent == self.name:
            return
        if opponent not in self.snapshots and opponent not in self.evicted:
            raise KeyError(f"{opponent!r} is neither {self.name!r} nor one of its snapshots")
        if self.elo is not None:
            self.elo.record(self.name, opponent, score)
        self._results.append(float(score))
        if opponent in self.snapshots:  # (a game begun before its opponent left the pool counts in the window only)
            self._scores.setdefault(opponent, deque(maxlen=self._results.maxlen)).append(float(score))
        self._games_since_snapshot += 1

    def win_rate(self) -> float | None:
        """The learner's mean score against snapshots over its last ``win_rate_games`` games since the last
        snapshot (what a snapshot on ``win_rate_threshold`` waits for); None until it has played that many."""
        if self._games_since_snapshot < (self._results.maxlen or 0):
            return None
        return float(np.mean(self._results))

    def recent_score(self) -> tuple[float, int] | None:
        """The learner's mean score against snapshots over its last games (``win_rate_games`` at most, whatever
        snapshots came between: what the metrics report), and how many games that is; None before the first."""
        return (float(np.mean(self._results)), len(self._results)) if self._results else None

    def _path(self, name: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{name}.pt"

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Plain data for a ``weights_only=True`` checkpoint: the snapshots' names and metadata, the results window,
        the generator's state and, for in-memory snapshots, their weights (files stay in ``directory``)."""
        return {
            "name": self.name,
            "snapshots": [asdict(s) for s in self.snapshots.values()],
            "weights": dict(self._weights),
            "results": list(self._results),
            "scores": {name: list(scores) for name, scores in self._scores.items()},
            "draws": dict(self.draws),
            "evicted": sorted(self.evicted),
            "games_since_snapshot": self._games_since_snapshot,
            "last_snapshot_update": self._last_snapshot_update,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s pool; a snapshot on disk must still have its file in ``directory``."""
        if state["name"] != self.name:
            raise ValueError(f"the saved pool is {state['name']!r}'s, not {self.name!r}'s")
        snapshots = [Snapshot(**s) for s in state["snapshots"]]
        for snapshot in snapshots:
            if self.directory is None and snapshot.name not in state["weights"]:
                raise FileNotFoundError(f"snapshot {snapshot.name!r}'s weights are not in the saved state")
            if self.directory is not None and not self._path(snapshot.name).exists():
                raise FileNotFoundError(f"snapshot {snapshot.name!r} has no file {self._path(snapshot.name)}")
        self.snapshots = {s.name: s for s in snapshots}
        self._weights = dict(state["weights"])
        self._loaded.clear()
        self._results.clear()
        self._results.extend(state["results"])
        self._scores = {
            name: deque(scores, maxlen=self._results.maxlen) for name, scores in state.get("scores", {}).items()
        }
        self.draws = dict(state.get("draws", {}))
        self.evicted = set(state.get("evicted", ()))
        self._games_since_snapshot = state.get("games_since_snapshot", len(state["results"]))  # older checkpoints
        self._last_snapshot_update = state["last_snapshot_update"]
        self.rng.bit_generator.state = state["rng"]
