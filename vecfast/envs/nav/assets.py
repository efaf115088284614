"""Resident scenes shared by a batch of envs, and their rotation through a dataset.

Following the Large Batch Simulation design, envs do not own scenes: ``num_slots`` scenes
are resident (on the simulation device, each held once), every env references one of them,
and the tensors of all resident scenes are stacked so one gather serves the whole batch.
A background thread reads and prepares the next scene of the dataset (decompressing the
file and computing the geodesic distance field of each of its goals) while the batch
steps; the main thread only copies a prepared scene into a free slot.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vecfast.envs.nav.geodesic import distance_field
from vecfast.envs.nav.scenes import NUM_TEXTURES, TEXTURE_SIZE, Scene, SceneIndex

_FAR = -1.0e4  # where unused box rows sit: zero-size boxes far away, never hit by a ray


@dataclass
class PreparedScene:
    """A scene read from disk with its goals' distance fields, ready to copy into a slot."""

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
        goals = scene.goals
        fields = np.stack([distance_field(scene.walkable, (int(r), int(c)), scene.resolution) for r, c in goals])
        prepared = PreparedScene(path=path, scene=scene, fields=fields)
        _prepared[path] = prepared
        if len(_prepared) > _PREPARED_CACHE_SIZE:
            _prepared.popitem(last=False)
        return prepared


class SceneBank:
    """``num_slots`` resident scenes as stacked tensors, filled from a dataset in a fixed order.

    The order of scenes is a permutation of ``index.files`` drawn from ``order_seed``, so
    which scene comes next never depends on timing: :meth:`install_next` waits for the
    loader thread when it has not finished yet.
    """

    def __init__(self, index: SceneIndex, num_slots: int, order_seed: int, device: torch.device) -> None:
        self.index = index
        self.device = device
        self.num_slots = num_slots
        files = index.files
        self.order = [files[i] for i in np.random.default_rng(order_seed).permutation(len(files))]
        self.cursor = 0
        rows, cols = index.grid_shape
        probe = Scene.load(files[0])
        self.resolution = probe.resolution
        self.agent_radius = probe.agent_radius
        num_goals = len(probe.goals)
        num_episodes = len(probe.episodes)
        self.walkable = torch.zeros((num_slots, rows, cols), dtype=torch.bool, device=device)
        self.fields = torch.full((num_slots, num_goals, rows, cols), torch.inf, device=device)
        self.boxes = torch.zeros((num_slots, index.max_boxes, 6), device=device)
        self.ceiling = torch.zeros(num_slots, device=device)
        self.floor_texture = torch.zeros(num_slots, dtype=torch.long, device=device)
        self.ceiling_texture = torch.zeros(num_slots, dtype=torch.long, device=device)
        self.textures = torch.zeros(
            (num_slots, NUM_TEXTURES, TEXTURE_SIZE, TEXTURE_SIZE, 3), dtype=torch.uint8, device=device
        )
        self.episodes = torch.zeros((num_slots, num_episodes, 6), device=device)
        self.episode_goal = torch.zeros((num_slots, num_episodes), dtype=torch.long, device=device)
        self.slot_path: list[Path | None] = [None] * num_slots
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="vecfast-nav-scenes")
        self._next: concurrent.futures.Future[PreparedScene] | None = None

    # ------------------------------------------------------------------ loading

    def prefetch(self) -> None:
        """Start preparing the next scene of the order in the background (once)."""
        if self._next is None:
            self._next = self._executor.submit(prepare_scene, self.order[self.cursor % len(self.order)])

    def install_next(self) -> int | None:
        """Put the next scene of the order in a slot and return the slot; ``None`` if every slot is taken.

        A scene that is already resident is not loaded twice: its slot is returned.
        """
        path = self.order[self.cursor % len(self.order)]
        if path in self.slot_path:
            if self._next is not None:
                self._next.cancel()  # prefetched for this very scene; not needed
                self._next = None
            self._advance()
            return self.slot_path.index(path)
        if None not in self.slot_path:
            return None
        self.prefetch()
        assert self._next is not None
        prepared = self._next.result()
        self._next = None
        slot = self.slot_path.index(None)
        self._write(slot, prepared)
        self._advance()
        return slot

    def _advance(self) -> None:
        self.cursor += 1

    def _write(self, slot: int, prepared: PreparedScene) -> None:
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
        device = self.device
        self.walkable[slot].zero_()
        self.walkable[slot, :rows, :cols] = torch.from_numpy(scene.walkable).to(device)
        self.fields[slot].fill_(torch.inf)
        self.fields[slot, :, :rows, :cols] = torch.from_numpy(prepared.fields).to(device)
        self.boxes[slot] = torch.tensor([_FAR, _FAR, _FAR, _FAR, 0.0, 0.0], device=device)
        self.boxes[slot, : len(scene.boxes)] = torch.from_numpy(scene.boxes).to(device)
        self.ceiling[slot] = scene.ceiling_height
        self.floor_texture[slot] = scene.floor_texture
        self.ceiling_texture[slot] = scene.ceiling_texture
        self.textures[slot] = torch.from_numpy(scene.textures).to(device)
        self.episodes[slot] = torch.from_numpy(scene.episodes).to(device)
        self.episode_goal[slot] = torch.from_numpy(scene.episode_goal).long().to(device)
        self.slot_path[slot] = prepared.path

    def release(self, slot: int) -> None:
        """Forget the scene in ``slot`` (its tensors are overwritten by the next install)."""
        self.slot_path[slot] = None

    @property
    def resident(self) -> list[str]:
        """Names of the resident scenes, by slot (``""`` for a free slot)."""
        return [p.stem if p is not None else "" for p in self.slot_path]

    def close(self) -> None:
        if self._next is not None:
            self._next.cancel()
        self._executor.shutdown(wait=True, cancel_futures=True)
