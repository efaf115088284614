"""Batched ray caster for depth and RGB, written in torch so it runs unchanged on CPU and CUDA.

A scene is a floor, a ceiling and axis-aligned boxes standing on the floor (walls,
partitions, furniture). One horizontal ray per image column is cast against every box of
the env's scene (slab test); a box hit at entry depth ``t_in`` and exit depth ``t_out``
covers every pixel row below a threshold slope (a box lower than the camera also shows
its top face between the two). The nearest box that covers a row is then found for all
rows at once without sorting: each box writes a packed int32 key (entry depth, height,
face, box index) at its first covered row with ``scatter_reduce(amin)``, and a running
minimum down the rows gives every pixel the nearest covering box. Per env and frame that is
O(columns x boxes + pixels) work in a fixed number of tensor ops, whatever the batch size.

Depth is z-depth (distance along the camera axis, as Habitat's depth sensor), in metres,
clipped to ``max_depth``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from vecfast.heap import keep_freed_heap_memory

# A packed key orders the boxes of a column by entry depth and carries what shading needs:
# bits 17-30 entry depth (14 bits over [0, max_depth]), 16 the face (x or y), 7-15 how far
# the box top lies below the camera in cm (0 for boxes as high as the camera or higher),
# 0-6 the box index.
_T_SHIFT, _T_LEVELS = 17, (1 << 14) - 1
_FACE_SHIFT, _DROP_SHIFT, _DROP_MASK, _INDEX_MASK = 16, 7, 511, 127
_NO_HIT = (1 << 31) - 1
MAX_BOXES = _INDEX_MASK + 1
TEXELS_PER_METRE = 16.0
_SHADE_X_FACE, _SHADE_Y_FACE, _SHADE_TOP, _SHADE_FLOOR, _SHADE_CEILING = 0.72, 0.92, 1.0, 0.85, 1.0


@dataclass
class SceneBatch:
    """Per-env scene data, gathered from the resident scenes for one render call.

    ``boxes`` (N, B, 6): x0, y0, x1, y1, height, texture id; unused rows far away with zero
    size. ``ceiling`` (N,) metres. For RGB: ``textures`` (S, T, 16, 16, 3) uint8 of all
    resident scenes, ``place`` (N,) each env's scene in it, ``floor_texture`` and
    ``ceiling_texture`` (N,) texture ids.
    """

    boxes: torch.Tensor
    ceiling: torch.Tensor
    textures: torch.Tensor | None = None
    place: torch.Tensor | None = None
    floor_texture: torch.Tensor | None = None
    ceiling_texture: torch.Tensor | None = None

    def select(self, envs: slice) -> SceneBatch:
        """The same scenes for a slice of the envs."""

        def part(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t[envs]

        return SceneBatch(
            self.boxes[envs],
            self.ceiling[envs],
            self.textures,
            part(self.place),
            part(self.floor_texture),
            part(self.ceiling_texture),
        )


class BatchRenderer:
    """Renders (N, H, W, 1) float32 depth and optionally (N, H, W, 3) uint8 RGB for a batch of agents."""

    def __init__(
        self,
        height: int = 64,
        width: int = 64,
        hfov_deg: float = 90.0,
        camera_height: float = 0.88,
        max_depth: float = 10.0,
        device: str | torch.device = "cpu",
        cpu_chunk: int = 128,
    ) -> None:
        if not 0 < camera_height <= _DROP_MASK / 100:
            raise ValueError(f"camera_height must be in (0, {_DROP_MASK / 100}] m, got {camera_height}")
        self.height, self.width = height, width
        self.cpu_chunk = cpu_chunk
        self.camera_height = camera_height
        self.max_depth = max_depth
        self.device = torch.device(device)
        if self.device.type == "cpu":
            keep_freed_heap_memory()
        tan_h = math.tan(math.radians(hfov_deg) / 2)
        tan_v = tan_h * height / width  # square pixels
        self.tan_v, self.tan_h = tan_v, tan_h
        # Image-plane offsets at unit depth: columns left to right, rows top to bottom.
        self.col_x = ((2 * torch.arange(width, device=self.device) + 1) / width - 1) * tan_h
        self.row_y = (1 - (2 * torch.arange(height, device=self.device) + 1) / height) * tan_v
        self._t_scale = _T_LEVELS / max_depth
        self._inv_row_y = 1.0 / self.row_y
        # A box top `drop` cm below the camera meets the ray of row r at depth drop * _top_factor[r] (rows below
        # the horizon; the factor is negative above it, where only boxes as high as the camera are seen).
        self._top_factor = (-0.01 * self._inv_row_y)[None, :, None]
        floor = camera_height * -self._inv_row_y
        self._floor_depth = torch.where(self.row_y < 0, floor, torch.full_like(floor, math.inf))

    def render(
        self, pos: torch.Tensor, heading: torch.Tensor, scene: SceneBatch, rgb: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Depth (N, H, W, 1) and, if ``rgb``, colour (N, H, W, 3) seen from ``pos`` (N, 2) facing ``heading`` (N,).

        On CPU the batch is rendered in chunks of ``cpu_chunk`` envs, whose intermediate
        tensors stay in cache; on GPUs in one go.
        """
        n = pos.shape[0]
        chunk = self.cpu_chunk if self.device.type == "cpu" else n
        with torch.no_grad():
            if n <= chunk:
                return self._render(pos, heading, scene, rgb)
            parts = [
                self._render(pos[i : i + chunk], heading[i : i + chunk], scene.select(slice(i, i + chunk)), rgb)
                for i in range(0, n, chunk)
            ]
            depth = torch.cat([d for d, _ in parts])
            colour = torch.cat([c for _, c in parts]) if rgb else None  # type: ignore[misc]
            return depth, colour

    def _render(
        self, pos: torch.Tensor, heading: torch.Tensor, scene: SceneBatch, rgb: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        n, cam_h, rows = pos.shape[0], self.camera_height, self.height
        boxes = scene.boxes
        if boxes.shape[1] > MAX_BOXES:
            raise ValueError(f"a scene has {boxes.shape[1]} boxes, the renderer handles {MAX_BOXES}")
        cos = torch.cos(heading).float()[:, None]  # heading may be float64 for batch-size-independent trig
        sin = torch.sin(heading).float()[:, None]
        boxes = self._cull(pos, cos, sin, boxes, keep_far=rgb)
        # Ray direction per column, scaled so that the ray parameter is z-depth: forward + x * right.
        dx = cos + self.col_x[None, :] * sin  # (N, W)
        dy = sin - self.col_x[None, :] * cos
        inv_dx = 1.0 / torch.where(dx.abs() < 1e-9, 1e-9, dx)
        inv_dy = 1.0 / torch.where(dy.abs() < 1e-9, 1e-9, dy)
        # Slab test in (N, B, W): box centre and half size relative to the camera, per axis.
        mid_x = ((boxes[:, :, 0] + boxes[:, :, 2]) * 0.5 - pos[:, 0, None])[:, :, None]
        mid_y = ((boxes[:, :, 1] + boxes[:, :, 3]) * 0.5 - pos[:, 1, None])[:, :, None]
        half_x = ((boxes[:, :, 2] - boxes[:, :, 0]) * 0.5)[:, :, None]
        half_y = ((boxes[:, :, 3] - boxes[:, :, 1]) * 0.5)[:, :, None]
        cx, hx = mid_x * inv_dx[:, None, :], half_x * inv_dx.abs()[:, None, :]
        cy, hy = mid_y * inv_dy[:, None, :], half_y * inv_dy.abs()[:, None, :]
        tx_near, ty_near = cx - hx, cy - hy
        t_in = torch.maximum(tx_near, ty_near)
        t_out = torch.minimum(cx + hx, cy + hy)
        hit = (t_in < t_out) & (t_out > 0)
        height = boxes[:, :, 4]
        rise = (height - cam_h)[:, :, None]
        # Rows whose slope y is at most y_max see this box: its front face, or its top if lower than the camera.
        # (0 / 0, a top at the camera's height with the camera on the line of a side, is the horizon's slope, 0.)
        y_max = (rise / torch.where(rise < 0, t_out, t_in)).nan_to_num_(nan=0.0, posinf=math.inf, neginf=-math.inf)
        first_row = torch.ceil((rows - 1) / 2 - y_max * (rows / (2 * self.tan_v))).clamp_(0, rows).long()
        drop = ((cam_h - height.clamp(max=cam_h)) * 100).round().int()
        tag = drop << _DROP_SHIFT | torch.arange(boxes.shape[1], dtype=torch.int32, device=pos.device)
        key = (t_in.clamp(0, self.max_depth) * self._t_scale).round_().int() << _T_SHIFT | tag[:, :, None]
        if rgb:
            key |= (tx_near > ty_near).int() << _FACE_SHIFT
        key = torch.where(hit, key, _NO_HIT)
        per_row = torch.full((n, rows + 1, self.width), _NO_HIT, dtype=torch.int32, device=pos.device)
        per_row.scatter_reduce_(1, first_row, key, reduce="amin")
        nearest = _cummin_rows(per_row[:, :rows])  # (N, H, W): nearest box covering each pixel

        t = (nearest >> _T_SHIFT).float().mul_(1.0 / self._t_scale)
        # Seen from above, a low box shows its top from its entry depth on: depth is the later of the two.
        top = ((nearest >> _DROP_SHIFT) & _DROP_MASK).float().mul_(self._top_factor)
        box_depth = torch.maximum(t, top)
        ceiling = (scene.ceiling[:, None] - cam_h) * self._inv_row_y[None, :]
        plane = torch.where(self.row_y[None, :] > 0, ceiling, self._floor_depth[None, :])  # (N, H)
        depth = torch.minimum(box_depth, plane.clamp_(max=self.max_depth)[:, :, None])
        if not rgb:
            return depth.unsqueeze(-1), None
        is_top = top > t
        colour = self._colour(pos, dx, dy, nearest, depth, box_depth, is_top, replace(scene, boxes=boxes))
        return depth.unsqueeze(-1), colour

    def _cull(
        self, pos: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, boxes: torch.Tensor, keep_far: bool
    ) -> torch.Tensor:
        """The boxes (N, B', 6) that may be in view, B' the most any env of the batch keeps.

        A box is dropped when all its corners lie behind the camera, beyond the left or the
        right side of the view, or (depth only) farther than ``max_depth``: a conservative
        test in O(N x B), cheaper than the O(N x B x W) ray tests it saves.
        """
        rel_x = torch.stack([boxes[:, :, 0], boxes[:, :, 2]], dim=2) - pos[:, 0, None, None]  # (N, B, 2)
        rel_y = torch.stack([boxes[:, :, 1], boxes[:, :, 3]], dim=2) - pos[:, 1, None, None]
        cx, cy = rel_x[:, :, :, None], rel_y[:, :, None, :]  # the 4 corners, as (N, B, 2, 2)
        c, s = cos[:, :, None, None], sin[:, :, None, None]
        forward = (cx * c + cy * s).flatten(2)
        right = (cx * s - cy * c).flatten(2)
        reach = self.tan_h * forward
        visible = (forward > 0).any(2) & (right <= reach).any(2) & (right >= -reach).any(2)
        if not keep_far:
            visible &= (forward < self.max_depth).any(2)
        keep = max(int(visible.sum(1).max()), 1)
        if keep == boxes.shape[1]:
            return boxes
        order = torch.argsort((~visible).to(torch.uint8), dim=1, stable=True)[:, :keep]
        return torch.gather(boxes, 1, order[:, :, None].expand(-1, -1, boxes.shape[2]))

    def _colour(
        self,
        pos: torch.Tensor,
        dx: torch.Tensor,
        dy: torch.Tensor,
        nearest: torch.Tensor,
        depth: torch.Tensor,
        box_depth: torch.Tensor,
        is_top: torch.Tensor,
        scene: SceneBatch,
    ) -> torch.Tensor:
        """Texture lookup at each pixel's hit point, shaded by the kind of surface."""
        assert scene.textures is not None and scene.place is not None
        assert scene.floor_texture is not None and scene.ceiling_texture is not None
        n = pos.shape[0]
        on_box = box_depth <= depth
        y = self.row_y[None, :, None]
        hx = pos[:, 0, None, None] + depth * dx[:, None, :]  # (N, H, W) hit point
        hy = pos[:, 1, None, None] + depth * dy[:, None, :]
        hz = self.camera_height + y * depth
        x_face = ((nearest >> _FACE_SHIFT) & 1).bool()
        front = on_box & ~is_top
        u = torch.where(front & x_face, hy, hx)
        v = torch.where(front, hz, hy)
        box_index = (nearest & _INDEX_MASK).long().clamp_(max=scene.boxes.shape[1] - 1)
        box_texture = torch.gather(scene.boxes[:, :, 5], 1, box_index.view(n, -1)).view_as(box_index).long()
        plane_texture = torch.where(y > 0, scene.ceiling_texture[:, None, None], scene.floor_texture[:, None, None])
        texture = torch.where(on_box, box_texture, plane_texture)
        num_textures, size = scene.textures.shape[1], scene.textures.shape[2]
        tu = (u * TEXELS_PER_METRE).floor_().long().remainder_(size)
        tv = (v * TEXELS_PER_METRE).floor_().long().remainder_(size)
        flat = ((scene.place[:, None, None] * num_textures + texture) * size + tv) * size + tu
        colour = scene.textures.reshape(-1, 3).index_select(0, flat.view(-1)).view(*flat.shape, 3)
        shade = torch.where(
            front,
            torch.where(x_face, _SHADE_X_FACE, _SHADE_Y_FACE),
            torch.where(on_box, _SHADE_TOP, torch.where(y > 0, _SHADE_CEILING, _SHADE_FLOOR)),
        )
        return (colour * shade[..., None]).to(torch.uint8)


def _cummin_rows(x: torch.Tensor) -> torch.Tensor:
    """Running minimum down dim 1 by doubling steps between two buffers (much faster than ``torch.cummin`` on CPU)."""
    src, dst = x, torch.empty_like(x)
    step = 1
    while step < x.shape[1]:
        dst[:, :step] = src[:, :step]
        torch.minimum(src[:, step:], src[:, :-step], out=dst[:, step:])
        src, dst = dst, (src if src is not x else torch.empty_like(x))
        step *= 2
    return src
