"""Which of vecfast's optional extras installs each optional module, and the one error that says so.

``pip install vecfast`` is the vector env, its wrappers and ``make_vec`` (gymnasium, numpy, cloudpickle,
psutil). Everything else comes with an extra; code that needs one imports it through :func:`require`, so a
missing package is an ``ImportError`` that names the command to run, never a bare ``No module named``.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from types import ModuleType

# top-level module -> the extra that installs it
EXTRA_OF = {
    "torch": "train",
    "rich": "train",
    "tensorboardX": "train",
    "yaml": "train",
    "filelock": "train",
    "vizdoom": "doom",
    "pettingzoo": "pettingzoo",
    "stable_baselines3": "sb3",
    "matplotlib": "plot",
    "wandb": "wandb",
    "onnx": "export",
    "onnxruntime": "export",
    "onnxscript": "export",
    "imageio_ffmpeg": "video",
    "PIL": "video",
    "ale_py": "atari",
    "ipywidgets": "notebook",
}
TORCH_FIRST = "on a CPU-only machine, pip install torch==2.13.0 first: an unpinned torch pulls a CUDA build"
OPENCV = "pip install opencv-python-headless (or opencv-python: either provides cv2; vecfast forces neither)"


class MissingExtraError(ImportError):
    """An optional module is not installed; the message names the extra that installs it."""


def explain(missing: ImportError, what: str) -> MissingExtraError | None:
    """``missing`` as a :class:`MissingExtraError` naming the extra that installs the missing module (None
    where no extra does: the ImportError is not about an optional dependency)."""
    name = (missing.name or "").partition(".")[0]
    if name not in EXTRA_OF or isinstance(missing, MissingExtraError):  # unrelated, or explained already
        return None
    extra = EXTRA_OF[name]
    hint = f" ({TORCH_FIRST})" if name == "torch" else ""
    return MissingExtraError(
        f"{what} needs {name}, which vecfast's {extra!r} extra installs: pip install 'vecfast[{extra}]'{hint}",
        name=name,
    )


@contextlib.contextmanager
def explained_imports(what: str) -> Iterator[None]:
    """Imports in this block that miss an optional module raise :class:`MissingExtraError` naming its extra."""
    try:
        yield
    except ImportError as missing:
        explained = explain(missing, what)
        if explained is None:
            raise
        raise explained from missing


def require(module: str, what: str) -> ModuleType:
    """Import ``module``; if it is not installed, raise :class:`MissingExtraError` naming its extra."""
    with explained_imports(what):
        imported = importlib.import_module(module)
    return imported
