"""Which of vecfast's optional extras installs each optional module, and the one error that says so.

``pip install vecfast`` is the vector env, its wrappers and ``make_vec`` (gymnasium, numpy, cloudpickle,
psutil). Everything else comes with an extra; code that needs one imports it through :func:`require`, so a
missing package is an ``ImportError`` that names the command to run, never a bare ``No module named``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from collections.abc import Iterable, Iterator
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
    "ray": "ray",
}
TRAIN_MODULES = tuple(module for module, extra in EXTRA_OF.items() if extra == "train")
# the start of an env's entry point (or of a PettingZoo module's name, or an id's namespace) -> the module it needs
ENV_MODULES = {
    "vecfast.envs.doom": "vizdoom",
    "vizdoom": "vizdoom",
    "vecfast.envs.nav": "torch",
    "ALE/": "ale_py",
    "pettingzoo.": "pettingzoo",
}
TORCH_FIRST = "on a CPU-only machine, pip install torch==2.13.0 first: an unpinned torch pulls a CUDA build"
OPENCV = "pip install opencv-python-headless (or opencv-python: either provides cv2; vecfast forces neither)"


class MissingExtraError(ImportError):
    """An optional module is not installed; the message names the extra that installs it."""


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    if module in sys.modules:
        return sys.modules[module] is not None  # None: hidden, as if not installed
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def env_modules(env: str) -> list[str]:
    """The optional modules that making ``env`` (an env id, ``module:Id``, or a PettingZoo module's dotted
    name) needs, as far as vecfast knows them."""
    import gymnasium

    name = env.rpartition(":")[2]
    spec = gymnasium.registry.get(name)
    entry_point = spec.entry_point if spec is not None and isinstance(spec.entry_point, str) else ""
    return sorted({module for start, module in ENV_MODULES.items() for key in (env, name, entry_point)
                   if key.startswith(start)})  # fmt: skip


def missing_extras_error(what: str, modules: Iterable[str]) -> MissingExtraError:
    """The error for ``modules`` (optional modules, not installed): each extra that installs one, named at once."""
    names = list(dict.fromkeys(modules))
    extras = list(dict.fromkeys(EXTRA_OF[name] for name in names))
    hint = f" ({TORCH_FIRST})" if "torch" in names else ""
    listed = lambda words: ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]  # noqa: E731
    installs = "extra installs" if len(extras) == 1 else "extras install"
    return MissingExtraError(
        f"{what} needs {listed(names)}, which vecfast's {listed([repr(e) for e in extras])} {installs}: "
        f"pip install 'vecfast[{','.join(extras)}]'{hint}",
        name=names[0],
    )


def require_all(modules: Iterable[str], what: str) -> None:
    """Raise one :class:`MissingExtraError` naming every extra that ``modules`` need and that is missing."""
    missing = [module for module in dict.fromkeys(modules) if not installed(module)]
    if missing:
        raise missing_extras_error(what, missing)


def explain(missing: ImportError, what: str) -> MissingExtraError | None:
    """``missing`` as a :class:`MissingExtraError` naming the extra that installs the missing module (None
    where no extra does: the ImportError is not about an optional dependency)."""
    name = (missing.name or "").partition(".")[0]
    if name not in EXTRA_OF or isinstance(missing, MissingExtraError):  # unrelated, or explained already
        return None
    return missing_extras_error(what, [name])


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
