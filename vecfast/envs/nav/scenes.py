"""Procedural indoor scenes for PointGoal navigation, one compressed ``.npz`` per scene.

No scan data can be downloaded, so floor plans are generated: a room tree split by walls
with doors (some splits are corridors between two walls), furniture-like boxes, wall
heights that vary (partitions lower than the ceiling), and procedural textures. Every
solid is an axis-aligned box standing on the floor, which is what the batched renderer
casts rays against. A scene file holds everything that can be computed ahead of time:

- ``boxes`` (B, 6) float32: x0, y0, x1, y1, height, texture id (metres, heights in cm steps)
- ``occupancy`` / ``walkable`` (rows, cols) bool at ``resolution`` metres: cells inside a
  solid / cells where the agent's centre may stand (clear of solids by ``agent_radius``,
  in the largest connected region, so every walkable cell reaches every other)
- ``textures`` (T, 16, 16, 3) uint8, ``floor_texture``, ``ceiling_texture``, ``ceiling_height``
- ``goals`` (G, 2) goal cells (row, col) and ``episodes`` (E, 6): start x, start y, start
  heading, goal x, goal y, geodesic distance, with ``episode_goal`` (E,) the goal index.
  As in Habitat's datasets, episodes need a geodesic distance of at least ``MIN_GEODESIC``
  and (but in open rooms) a geodesic/Euclidean ratio above ``MIN_RATIO``.

Scene ``i`` of a set depends only on (seed, i) (and on whether the set has open rooms, which
its name says: :func:`scene_name`), so sets are reproducible and scenes can be generated in
any order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from vecfast.envs.nav.geodesic import distance_fields

FORMAT_VERSION = 1
# bumped whenever a (seed, index) generates another scene than before: it names the default sets' cache
GENERATOR_VERSION = 2
RESOLUTION = 0.05  # metres per grid cell
AGENT_RADIUS = 0.18  # Habitat's PointNav challenge agent
TEXTURE_SIZE = 16
NUM_TEXTURES = 10
GOALS_PER_SCENE = 8
EPISODES_PER_GOAL = 8
MIN_GEODESIC = 1.0
MAX_GEODESIC = 30.0
MIN_RATIO = 1.1
# 64 scenes x 8 goals x 8 starts: 4,096 training episodes (8 scenes left each DD-PPO rank with 2-3 floor plans)
DEFAULT_SET_SIZE = 64
INDEX_FILE = "index.json"
# split -> the seed of its scenes: scenes are generated from (seed, index), so the splits draw from
# disjoint generator streams and no scene of one is a scene of the other
SPLIT_SEEDS = {"train": 0, "val": 1}
# split -> the size of its default set in the user cache (a scene takes ~0.1 s to generate, once): val is only
# evaluated on, with one env per scene by default, so that 200 episodes average over 16 floor plans
DEFAULT_SPLIT_SIZES = {"train": DEFAULT_SET_SIZE, "val": 16}

_WALL = 0.12  # wall thickness, metres
_MIN_ROOM = 1.6  # smallest room side, metres


@dataclasses.dataclass
class Scene:
    """One scene as stored on disk (see the module docstring for the fields)."""

    name: str
    boxes: np.ndarray
    occupancy: np.ndarray
    walkable: np.ndarray
    textures: np.ndarray
    floor_texture: int
    ceiling_texture: int
    ceiling_height: float
    goals: np.ndarray
    episodes: np.ndarray
    episode_goal: np.ndarray
    resolution: float = RESOLUTION
    agent_radius: float = AGENT_RADIUS

    @property
    def grid_shape(self) -> tuple[int, int]:
        return self.walkable.shape

    def save(self, path: Path) -> None:
        """Write atomically (temp file + rename), so concurrent readers never see half a file."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.savez_compressed(
                f,
                version=FORMAT_VERSION,
                boxes=self.boxes,
                occupancy=self.occupancy,
                walkable=self.walkable,
                textures=self.textures,
                floor_texture=self.floor_texture,
                ceiling_texture=self.ceiling_texture,
                ceiling_height=self.ceiling_height,
                goals=self.goals,
                episodes=self.episodes,
                episode_goal=self.episode_goal,
                resolution=self.resolution,
                agent_radius=self.agent_radius,
            )
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | Path) -> Scene:
        path = Path(path)
        with np.load(path) as data:
            if int(data["version"]) != FORMAT_VERSION:
                raise ValueError(f"{path}: scene format {int(data['version'])}, expected {FORMAT_VERSION}")
            return cls(
                name=path.stem,
                boxes=data["boxes"],
                occupancy=data["occupancy"],
                walkable=data["walkable"],
                textures=data["textures"],
                floor_texture=int(data["floor_texture"]),
                ceiling_texture=int(data["ceiling_texture"]),
                ceiling_height=float(data["ceiling_height"]),
                goals=data["goals"],
                episodes=data["episodes"],
                episode_goal=data["episode_goal"],
                resolution=float(data["resolution"]),
                agent_radius=float(data["agent_radius"]),
            )


# ---------------------------------------------------------------------------- geometry


def rasterize(
    boxes: np.ndarray, grid_shape: tuple[int, int], resolution: float, agent_radius: float
) -> tuple[np.ndarray, np.ndarray]:
    """(occupancy, free): cell centres inside a box, and cell centres farther than ``agent_radius`` from every box."""
    rows, cols = grid_shape
    cy = (np.arange(rows) + 0.5) * resolution
    cx = (np.arange(cols) + 0.5) * resolution
    occupancy = np.zeros(grid_shape, dtype=bool)
    free = np.ones(grid_shape, dtype=bool)
    for x0, y0, x1, y1, *_ in boxes:
        dx = np.maximum(np.maximum(x0 - cx, cx - x1), 0.0)
        dy = np.maximum(np.maximum(y0 - cy, cy - y1), 0.0)
        occupancy[np.ix_((cy >= y0) & (cy <= y1), (cx >= x0) & (cx <= x1))] = True
        free &= (dy[:, None] ** 2 + dx[None, :] ** 2) > agent_radius**2
    return occupancy, free


def largest_region(free: np.ndarray) -> np.ndarray:
    """The largest connected part of ``free`` (as the geodesic graph connects cells).

    Every move of the graph crosses only walkable cells that are side by side, so its
    components are the 4-connected components. They are found over runs of free cells
    (row by row; a run joins the runs it touches in the row above), so a scene costs a few
    hundred unions in Python. Of equal sizes, the component reached first in raster order wins.
    """
    edges = np.diff(np.pad(free.astype(np.int8), ((0, 0), (1, 1))), axis=1)
    rows, starts = np.nonzero(edges == 1)
    ends = np.nonzero(edges == -1)[1]  # exclusive; np.nonzero is row-major, so runs line up
    parent = list(range(len(rows)))

    def root(run: int) -> int:
        while parent[run] != run:
            parent[run] = parent[parent[run]]
            run = parent[run]
        return run

    row_first = np.searchsorted(rows, np.arange(free.shape[0] + 1))
    for row in range(1, free.shape[0]):
        above, below = row_first[row - 1], row_first[row]
        for run in range(below, row_first[row + 1]):
            while above < below and ends[above] <= starts[run]:
                above += 1
            touching = above
            while touching < below and starts[touching] < ends[run]:
                a, b = root(touching), root(run)
                parent[max(a, b)] = min(a, b)  # a component's root is its first run in raster order
                touching += 1
    if not parent:
        return np.zeros_like(free)
    roots = np.array([root(run) for run in range(len(parent))])
    sizes = np.bincount(roots, weights=ends - starts)
    largest = int(np.argmax(sizes))  # the first of equal sizes: the lowest root, reached first
    region = np.zeros_like(free)
    for run in np.nonzero(roots == largest)[0]:
        region[rows[run], starts[run] : ends[run]] = True
    return region


def _cut_range(lo: float, hi: float, gap: float) -> tuple[float, float]:
    """Bounds (low, high) of a cut of [lo, hi] that leaves ``_MIN_ROOM`` before it and after its wall and ``gap``.

    Every coordinate is a multiple of 1 cm: rounding the bounds to it drops the float error
    of the sums, so a room that fits exactly gets ``low == high`` and one too small ``high < low``.
    """
    return round(lo + _MIN_ROOM, 2), round(hi - _MIN_ROOM - gap - _WALL, 2)


def _split_room(
    rect: tuple[float, float, float, float], rng: np.random.Generator, ceiling: float, depth: int
) -> tuple[list[tuple[float, ...]], list[tuple[float, float, float, float]], list[tuple[float, float]]]:
    """Split ``rect`` recursively: (wall boxes, leaf rooms, door centres).

    Whether a room is large enough to split is read off the range its cut is drawn from: a
    separate float check let a room exactly ``2 * _MIN_ROOM + _WALL`` long through, with a
    range of minus a rounding error.
    """
    x0, y0, x1, y1 = rect
    w, h = x1 - x0, y1 - y0
    long_side = max(w, h)
    vertical = w >= h  # the wall runs along y, splitting x
    lo, hi = (x0, x1) if vertical else (y0, y1)
    low, high = _cut_range(lo, hi, 0.0)
    if high < low or min(w, h) < 2.0 or (depth >= 2 and rng.random() < 0.35) or depth >= 5:
        return [], [rect], []
    corridor = long_side > 2 * _MIN_ROOM + 3.5 and rng.random() < 0.3
    gap = round(float(rng.uniform(1.2, 1.6)), 2) if corridor else 0.0
    cut = round(float(rng.uniform(*_cut_range(lo, hi, gap))), 2)
    cuts = [cut, cut + _WALL + gap] if corridor else [cut]
    height = ceiling if rng.random() < 0.75 else round(float(rng.uniform(1.0, 2.0)), 2)
    texture = int(rng.integers(NUM_TEXTURES - 2))
    walls: list[tuple[float, ...]] = []
    doors: list[tuple[float, float]] = []
    span_lo, span_hi = (y0, y1) if vertical else (x0, x1)
    for c in cuts:
        door = float(rng.uniform(0.9, 1.3))
        d0 = round(float(rng.uniform(span_lo + 0.3, span_hi - 0.3 - door)), 2)
        d1 = round(d0 + door, 2)
        for s0, s1 in ((span_lo, d0), (d1, span_hi)):
            if s1 - s0 > 1e-6:
                walls.append(
                    (c, s0, c + _WALL, s1, height, texture) if vertical else (s0, c, s1, c + _WALL, height, texture)
                )
        mid = (d0 + d1) / 2
        doors.append((c + _WALL / 2, mid) if vertical else (mid, c + _WALL / 2))
    if vertical:
        parts = [(x0, y0, cuts[0], y1), (cuts[-1] + _WALL, y0, x1, y1)]
    else:
        parts = [(x0, y0, x1, cuts[0]), (x0, cuts[-1] + _WALL, x1, y1)]
    rooms: list[tuple[float, float, float, float]] = []
    for part in parts:
        sub_walls, sub_rooms, sub_doors = _split_room(part, rng, ceiling, depth + 1)
        walls += sub_walls
        rooms += sub_rooms
        doors += sub_doors
    return walls, rooms, doors


def _furniture(
    rooms: list[tuple[float, float, float, float]], doors: list[tuple[float, float]], rng: np.random.Generator
) -> list[tuple[float, ...]]:
    """A few boxes per room, apart from each other and from the doors."""
    placed: list[tuple[float, ...]] = []
    for x0, y0, x1, y1 in rooms:
        for _ in range(int(rng.integers(0, 4))):
            for _try in range(10):
                w, d = (round(float(v), 2) for v in rng.uniform(0.4, 1.6, size=2))
                if w > (x1 - x0) - 1.0 or d > (y1 - y0) - 1.0:
                    continue
                bx = round(float(rng.uniform(x0, x1 - w)), 2)
                by = round(float(rng.uniform(y0, y1 - d)), 2)
                box = (bx, by, bx + w, by + d)
                near_door = any(
                    max(box[0] - px, 0, px - box[2]) ** 2 + max(box[1] - py, 0, py - box[3]) ** 2 < 0.9**2
                    for px, py in doors
                )
                overlaps = any(
                    box[0] < o[2] + 0.1 and o[0] < box[2] + 0.1 and box[1] < o[3] + 0.1 and o[1] < box[3] + 0.1
                    for o in placed
                )
                if not near_door and not overlaps:
                    height = round(
                        float(rng.choice([rng.uniform(0.4, 0.8), rng.uniform(0.8, 1.2), rng.uniform(1.6, 2.1)])), 2
                    )
                    placed.append((*box, height, int(rng.integers(NUM_TEXTURES - 2))))
                    break
    return placed


def _textures(rng: np.random.Generator) -> np.ndarray:
    """Procedural 16x16 textures: noise, stripes, checkers and bricks in random colours."""
    out = np.empty((NUM_TEXTURES, TEXTURE_SIZE, TEXTURE_SIZE, 3), dtype=np.uint8)
    yy, xx = np.mgrid[:TEXTURE_SIZE, :TEXTURE_SIZE]
    for i in range(NUM_TEXTURES):
        a, b = rng.uniform(30, 230, size=(2, 3))
        kind = rng.integers(4)
        if kind == 0:
            mix = rng.uniform(0, 0.3, size=yy.shape)
        elif kind == 1:
            mix = ((xx // int(rng.integers(2, 5))) % 2).astype(float)
        elif kind == 2:
            mix = (((xx // 4) + (yy // 4)) % 2).astype(float)
        else:
            mix = ((yy % 4 == 0) | ((xx + 4 * ((yy // 4) % 2)) % 8 == 0)).astype(float)
        img = a[None, None] * (1 - mix[..., None]) + b[None, None] * mix[..., None]
        out[i] = np.clip(img + rng.normal(0, 6, size=img.shape), 0, 255).astype(np.uint8)
    return out


def _sample_episodes(
    walkable: np.ndarray, resolution: float, min_ratio: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Goals and episodes as Habitat samples them: geodesic in range and path not too straight.

    Candidate goals are drawn as many at a time as goals are missing, so their distance
    fields are searched together (:func:`distance_fields`).
    """
    cells = np.argwhere(walkable)
    goals, episodes, episode_goal = [], [], []
    for _round in range(20):
        if len(goals) == GOALS_PER_SCENE:
            break
        candidates = cells[rng.integers(len(cells), size=GOALS_PER_SCENE - len(goals))]
        for goal, field in zip(candidates, distance_fields(walkable, candidates, resolution), strict=True):
            starts = cells[rng.integers(len(cells), size=400)]
            geo = field[starts[:, 0], starts[:, 1]].astype(np.float64)
            euclid = np.hypot(*(starts - goal).T) * resolution
            ok = (geo >= MIN_GEODESIC) & (geo <= MAX_GEODESIC) & (geo > min_ratio * euclid)
            chosen = np.unique(starts[ok], axis=0)
            if len(chosen) < EPISODES_PER_GOAL:
                continue
            chosen = chosen[rng.permutation(len(chosen))[:EPISODES_PER_GOAL]]
            gxy = (goal[::-1] + 0.5) * resolution
            for start in chosen:
                sxy = (start[::-1] + 0.5) * resolution
                heading = rng.uniform(-math.pi, math.pi)
                episodes.append((sxy[0], sxy[1], heading, gxy[0], gxy[1], field[start[0], start[1]]))
                episode_goal.append(len(goals))
            goals.append(goal)
    if len(goals) < GOALS_PER_SCENE:
        raise RuntimeError("scene too open or too small to sample episodes; try another seed")
    return np.array(goals, np.int32), np.array(episodes, np.float32), np.array(episode_goal, np.int32)


def floor_plan(rng: np.random.Generator, open_rooms: bool = False) -> tuple[np.ndarray, tuple[int, int], float]:
    """(boxes, grid shape, ceiling height) of a scene: its layout, cheap next to what is computed from it.

    ``open_rooms``: the outer walls only, no inner walls or furniture, so every shortest path is straight.
    """
    width, depth = (round(float(v), 1) for v in rng.uniform(7.0, 13.0, size=2))
    ceiling = round(float(rng.uniform(2.4, 3.2)), 2)
    outer = [
        (0.0, 0.0, width, _WALL),
        (0.0, depth - _WALL, width, depth),
        (0.0, 0.0, _WALL, depth),
        (width - _WALL, 0.0, width, depth),
    ]
    outer_texture = int(rng.integers(NUM_TEXTURES - 2))
    boxes = [(*b, ceiling, outer_texture) for b in outer]
    if not open_rooms:
        walls, rooms, doors = _split_room((_WALL, _WALL, width - _WALL, depth - _WALL), rng, ceiling, 0)
        boxes += walls + _furniture(rooms, doors, rng)
    grid_shape = (math.ceil(depth / RESOLUTION), math.ceil(width / RESOLUTION))
    return np.array(boxes, dtype=np.float32), grid_shape, ceiling


def scene_name(seed: int, index: int, open_rooms: bool = False) -> str:
    """A scene's name, which is all that generates it: (seed, index) and whether its set has open rooms."""
    return f"{'open' if open_rooms else 'scene'}_{seed}_{index:05d}"


def generate_scene(seed: int, index: int, name: str | None = None, open_rooms: bool = False) -> Scene:
    """Scene ``index`` of the set generated from ``seed``.

    ``open_rooms``: a single room without inner walls or furniture (:func:`floor_plan`), for agents
    that do not see; its episodes need no detour (a straight path is the shortest there).
    """
    rng = np.random.default_rng([seed, index])
    boxes, grid_shape, ceiling = floor_plan(rng, open_rooms)
    occupancy, free = rasterize(boxes, grid_shape, RESOLUTION, AGENT_RADIUS)
    walkable = largest_region(free)
    goals, episodes, episode_goal = _sample_episodes(walkable, RESOLUTION, 0.0 if open_rooms else MIN_RATIO, rng)
    return Scene(
        name=name or scene_name(seed, index, open_rooms),
        boxes=boxes,
        occupancy=occupancy,
        walkable=walkable,
        textures=_textures(rng),
        floor_texture=NUM_TEXTURES - 2,
        ceiling_texture=NUM_TEXTURES - 1,
        ceiling_height=ceiling,
        goals=goals,
        episodes=episodes,
        episode_goal=episode_goal,
    )


# ---------------------------------------------------------------------------- scene sets


def make_scenes(num: int, seed: int, out_dir: str | Path, open_rooms: bool = False) -> list[Path]:
    """Generate scenes ``0 .. num-1`` of ``seed`` into ``out_dir`` (existing ones are kept) and index them."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(num):
        path = out / f"{scene_name(seed, i, open_rooms)}.npz"
        if not path.exists():
            generate_scene(seed, i, path.stem, open_rooms).save(path)
        paths.append(path)
    write_index(out)
    return paths


def write_index(scene_dir: Path) -> None:
    """Record the scene files and the largest grid, so envs can size their places without opening every file."""
    entries = []
    for path in sorted(scene_dir.glob("*.npz")):
        with np.load(path) as data:
            entries.append(
                {"file": path.name, "grid_shape": list(data["walkable"].shape), "num_boxes": len(data["boxes"])}
            )
    index = {"version": FORMAT_VERSION, "scenes": entries}
    tmp = scene_dir / f".{INDEX_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(index, indent=1) + "\n")
    os.replace(tmp, scene_dir / INDEX_FILE)


@dataclasses.dataclass(frozen=True)
class SceneIndex:
    """A scene directory's files and the largest grid and box count among them (to size resident places)."""

    files: list[Path]
    grid_shape: tuple[int, int]
    max_boxes: int

    def share(self, part: int, parts: int) -> SceneIndex:
        """Part ``part`` of ``parts`` disjoint parts of the files that together are all of them (every
        ``parts``-th file from the ``part``-th), so that the ranks of a distributed run train on different
        scenes. A set of fewer files than parts gives each part one file (parts then share files).
        Places stay sized for the whole set."""
        if not 0 <= part < parts:
            raise ValueError(f"scene_shard must be (part, parts) with 0 <= part < parts, got {(part, parts)}")
        return dataclasses.replace(self, files=self.files[part % len(self.files) :: parts])


def read_index(scene_dir: str | Path) -> SceneIndex:
    """The index of a scene directory, written by :func:`make_scenes`."""
    scene_dir = Path(scene_dir)
    index_path = scene_dir / INDEX_FILE
    if not index_path.exists():
        raise FileNotFoundError(f"{scene_dir} has no {INDEX_FILE}: create it with `vecfast nav make-scenes --out DIR`")
    index = json.loads(index_path.read_text())
    if index.get("version") != FORMAT_VERSION or not index["scenes"]:
        raise ValueError(f"{index_path}: no scenes of format version {FORMAT_VERSION}")
    entries = index["scenes"]
    return SceneIndex(
        files=[scene_dir / e["file"] for e in entries],
        grid_shape=(max(e["grid_shape"][0] for e in entries), max(e["grid_shape"][1] for e in entries)),
        max_boxes=max(e["num_boxes"] for e in entries),
    )


def default_scene_dir(num: int = DEFAULT_SET_SIZE, seed: int = 0, open_rooms: bool = False) -> Path:
    """The default scene set in the user cache (``$XDG_CACHE_HOME``, else ``~/.cache``), generated on first use.

    A file lock makes concurrent first uses (say, the workers of a vector env) generate it once.
    The directory is named by the generator's version too, so a set cached by an older generator
    (other scenes under the same names) is never mixed with or mistaken for this one's.
    """
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    kind = "open-" if open_rooms else ""
    out = cache / "vecfast" / "nav" / f"scenes-v{FORMAT_VERSION}-gen{GENERATOR_VERSION}-{kind}seed{seed}-n{num}"
    if (out / INDEX_FILE).exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    with _locked(out / ".lock"):
        if not (out / INDEX_FILE).exists():
            make_scenes(num, seed, out, open_rooms)
    return out


def split_scene_dir(scenes: str | Path | None, split: str) -> Path:
    """The scene directory of ``split`` ("train" or "val", held out: never trained on).

    ``scenes=None``: the default sets in the user cache, 64 scenes of seed 0 (train) and 16 of seed 1
    (val), each in its own directory with its own index. A directory of your own holds each split in
    a subdirectory (``DIR/train``, ``DIR/val``: ``vecfast nav make-scenes --out DIR --split val``); a
    directory with its scenes at the top is a training set only. A val set that shares a scene file
    with its directory's training set is refused (:class:`ValueError`).
    """
    if split not in SPLIT_SEEDS:
        raise ValueError(f"split must be one of {sorted(SPLIT_SEEDS)}, got {split!r}")
    if scenes is None:
        return default_scene_dir(DEFAULT_SPLIT_SIZES[split], SPLIT_SEEDS[split])
    scenes = Path(scenes)
    if (scenes / split / INDEX_FILE).exists():
        if split == "val":
            check_disjoint(scenes)
        return scenes / split
    if split == "train" and (scenes / INDEX_FILE).exists():
        return scenes
    raise FileNotFoundError(
        f"{scenes} has no {split!r} scenes ({scenes / split / INDEX_FILE}): make them with "
        f"`vecfast nav make-scenes --out {scenes} --split {split}`"
    )


def check_disjoint(scenes: Path, adding: tuple[str, list[str]] | None = None) -> None:
    """Raise :class:`ValueError` if the train and val sets of the directory ``scenes`` share a scene, with
    ``adding`` (split, file names about to be written to it) counted in. A scene file's name is its
    (seed, index), the whole of what generates it, so sets of disjoint names hold no scene in common."""
    train_dir = scenes / "train" if (scenes / "train" / INDEX_FILE).exists() else scenes
    names = {split: set(_index_files(d)) for split, d in (("train", train_dir), ("val", scenes / "val"))}
    if adding is not None:
        names[adding[0]] |= set(adding[1])
    shared = sorted(names["train"] & names["val"])
    if shared:
        verb = "share" if adding is None else "would share"
        raise ValueError(
            f"the train and val scenes of {scenes} {verb} {len(shared)} scene(s) ({', '.join(shared[:3])}"
            f"{', ...' if len(shared) > 3 else ''}): make the val split from another --seed than the train split"
        )


def _index_files(scene_dir: Path) -> list[str]:
    """The scene files a directory's index lists (none without an index)."""
    index_path = scene_dir / INDEX_FILE
    return [e["file"] for e in json.loads(index_path.read_text()).get("scenes", [])] if index_path.exists() else []


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
