"""Resident scenes shared by a batch of envs, and their rotation through a dataset.

Following the Large Batch Simulation design, envs do not own scenes: ``num_places`` scenes
are resident (on the simulation device, each held once), every env references one of them,
and the tensors of all resident scenes are stacked so one gather serves the whole batch.
A background thread reads and prepares the next scene of the dataset (decompressing the
file and computing the geodesic distance field of each of its goals) while the batch
steps; the main thread only copies a prepared scene into a free place.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vecfast.envs.nav.geodesic import distance_fields
from vecfast.envs.nav.scenes import NUM_TEXTURES, TEXTURE_SIZE, Scene, SceneIndex

_FAR = -1.0e4  # where unused box rows sit: zero-size boxes far away, never hit by a ray


@dataclass
class PreparedScene:
    """A scene read from disk with its goals' distance fields, ready to copy into a place."""

    path: Path
    scene: Scene
    fields: np.ndarray  # (G, rows, cols) float32 metres, inf where unreachable


_PREPARED_CACHE_SIZE = 2
_prepared: collections.OrderedDict[Path, PreparedScene] = collections.OrderedDict()
_prepared_lock = threading.Lock()


def prepare_scene(path: Path) -> PreparedScene:
    """Read a scene and compute the distance field of each goal (the expensive part, run off the step path).

    The last few results are kept per process (read-only), so that many single envs in
    one worker process, which all start on the same scene, prepare it once.
    """
    with _prepared_lock:  # held while computing: concurrent callers wait for one result
        if path in _prepared:
            _prepared.move_to_end(path)
            return _prepared[path]
        scene = Scene.load(path)
        fields = distance_fields(scene.walkable, scene.goals, scene.resolution)
        prepared = PreparedScene(path=path, scene=scene, fields=fields)
        _prepared[path] = prepared
        if len(_prepared) > _PREPARED_CACHE_SIZE:
            _prepared.popitem(last=False)
        return prepared


class SceneBank:
    """``num_places`` resident scenes as stacked tensors, filled from a dataset in a fixed order.

    The order of scenes is a permutation of ``index.files`` drawn from ``order_seed``, so
    which scene comes next never depends on timing: :meth:`install_next` waits for the
    loader thread when it has not finished yet.
    """

    def __init__(self, index: SceneIndex, num_places: int, order_seed: int, device: torch.device) -> None:
        self.index = index
        self.device = device
        self.num_places = num_places
        files = index.files
        self.order = [files[i] for i in np.random.default_rng(order_seed).permutation(len(files))]
        self.cursor = 0
        rows, cols = index.grid_shape
        probe = Scene.load(files[0])
        self.resolution = probe.resolution
        self.agent_radius = probe.agent_radius
        num_goals = len(probe.goals)
        num_episodes = len(probe.episodes)
        self.walkable = self._new((num_places, rows, cols), np.bool_, False)
        self.fields = self._new((num_places, num_goals, rows, cols), np.float32, np.inf)
        self.boxes = self._new((num_places, index.max_boxes, 6), np.float32, 0.0)
        self.ceiling = self._new((num_places,), np.float32, 0.0)
        self.floor_texture = self._new((num_places,), np.int64, 0)
        self.ceiling_texture = self._new((num_places,), np.int64, 0)
        self.textures = self._new((num_places, NUM_TEXTURES, TEXTURE_SIZE, TEXTURE_SIZE, 3), np.uint8, 0)
        self.episodes = self._new((num_places, num_episodes, 6), np.float32, 0.0)
        self.episode_goal = self._new((num_places, num_episodes), np.int64, 0)
        self.place_path: list[Path | None] = [None] * num_places
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="vecfast-nav-scenes")
        self._next: concurrent.futures.Future[PreparedScene] | None = None

    # ------------------------------------------------------------------ memory
    # On CPU the place tensors are filled through numpy, not torch ops: large torch copies run in
    # OpenMP threads, after which a fork()ed child (a worker of a process-based vector env) hangs
    # in its first parallel torch op. Single envs thus never start torch's thread pool.

    def _new(self, shape: tuple[int, ...], dtype: type, fill: float | bool) -> torch.Tensor:
        array = np.full(shape, fill, dtype=dtype)
        return torch.from_numpy(array) if self.device.type == "cpu" else torch.from_numpy(array).to(self.device)

    def _put(self, target: torch.Tensor, value: np.ndarray | float | bool) -> None:
        if self.device.type == "cpu":
            target.numpy()[...] = value
        else:
            target.copy_(torch.as_tensor(np.asarray(value)))

    # ------------------------------------------------------------------ loading

    def prefetch(self) -> None:
        """Start preparing the next scene of the order in the background (once)."""
        if self._next is None:
            self._next = self._executor.submit(prepare_scene, self.order[self.cursor % len(self.order)])

    def install_next(self) -> int | None:
        """Put the next scene of the order in a place and return the place; ``None`` if every place is taken.

        A scene that is already resident is not loaded twice: its place is returned.
        """
        path = self.order[self.cursor % len(self.order)]
        if path in self.place_path:
            if self._next is not None:
                self._next.cancel()  # prefetched for this very scene; not needed
                self._next = None
            self._advance()
            return self.place_path.index(path)
        if None not in self.place_path:
            return None
        self.prefetch()
        assert self._next is not None
        prepared = self._next.result()
        self._next = None
        place = self.place_path.index(None)
        self._write(place, prepared)
        self._advance()
        return place

    def _advance(self) -> None:
        self.cursor += 1

    def _write(self, place: int, prepared: PreparedScene) -> None:
        scene = prepared.scene
        rows, cols = scene.grid_shape
        if (
            rows > self.walkable.shape[1]
            or cols > self.walkable.shape[2]
            or len(scene.boxes) > self.boxes.shape[1]
            or scene.episodes.shape != self.episodes.shape[1:]
            or prepared.fields.shape[0] != self.fields.shape[1]
        ):
            raise ValueError(f"{prepared.path} does not match its index; regenerate the index with make_scenes")
        if scene.resolution != self.resolution or scene.agent_radius != self.agent_radius:
            raise ValueError(f"{prepared.path}: resolution/agent radius differ from the other scenes of the set")
        walkable = np.zeros(self.walkable.shape[1:], dtype=bool)
        walkable[:rows, :cols] = scene.walkable
        fields = np.full(self.fields.shape[1:], np.inf, dtype=np.float32)
        fields[:, :rows, :cols] = prepared.fields
        boxes = np.tile(np.array([_FAR, _FAR, _FAR, _FAR, 0.0, 0.0], np.float32), (self.boxes.shape[1], 1))
        boxes[: len(scene.boxes)] = scene.boxes
        self._put(self.walkable[place], walkable)
        self._put(self.fields[place], fields)
        self._put(self.boxes[place], boxes)
        self._put(self.ceiling[place], scene.ceiling_height)
        self._put(self.floor_texture[place], scene.floor_texture)
        self._put(self.ceiling_texture[place], scene.ceiling_texture)
        self._put(self.textures[place], scene.textures)
        self._put(self.episodes[place], scene.episodes)
        self._put(self.episode_goal[place], scene.episode_goal)
        self.place_path[place] = prepared.path

    def release(self, place: int) -> None:
        """Forget the scene in ``place`` (its tensors are overwritten by the next install)."""
        self.place_path[place] = None

    @property
    def resident(self) -> list[str]:
        """Names of the resident scenes, by place (``""`` for a free place)."""
        return [p.stem if p is not None else "" for p in self.place_path]

    def close(self) -> None:
        if self._next is not None:
            self._next.cancel()
        self._executor.shutdown(wait=True, cancel_futures=True)
