"""``vecfast train --config FILE``: a run's options from a YAML or JSON file, under their command-line names.

A file of options is one mapping: ``env`` (or ``env_id``), ``algo``, ``scheme``, ``total_env_steps`` (or
``train_for_env_steps``), ``env_kwargs``, ``num_envs``, ``num_processes``, ``run_dir`` and any TrainConfig key
(``batch_size: 1024``). A run's own ``RUN_DIR/config.json`` is one too, so that ``vecfast train --config
runs/X/config.json`` replays that run (its env, algorithm, total and config) into a new run directory; what the
run recorded about itself (its vectorisation, env counts, vecfast's version) is left out, and a distributed run's
``world_size`` becomes ``num_processes``. Options on the command line override the file's.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vecfast.extras import require
from vecfast.trainers.config import TrainConfig, check_keys

ALIASES = {"env_id": "env", "train_for_env_steps": "total_env_steps"}
RUN_OPTIONS = ("env", "algo", "scheme", "total_env_steps", "env_kwargs", "num_envs", "num_processes", "run_dir")
# what RUN_DIR/config.json records about the run itself, not an option of a new one
RUN_RECORD = ("vectorization", "env_frameskip", "num_envs", "world_size", "vecfast_version", "auto_tune", "config")


@dataclass
class ConfigFile:
    """A config file's options: the run's (``None`` where the file has none) and the TrainConfig keys."""

    env: str | None = None
    algo: str | None = None
    scheme: str | None = None
    total_env_steps: int | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    num_envs: int | None = None
    num_processes: int | None = None
    run_dir: Path | None = None
    config: dict[str, Any] = field(default_factory=dict)


def read_config_file(path: Path) -> ConfigFile:
    """``path``'s options; a ValueError naming the file for one that is not a mapping of known options."""
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        yaml = require("yaml", "a YAML config file")
        try:
            values = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{path} is not valid YAML: {exc}") from None
    else:
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path} must hold a mapping of options, got {type(values).__name__}")
    values = {ALIASES.get(key, key): value for key, value in values.items()}
    options: dict[str, Any] = {}
    if isinstance(values.get("config"), dict):  # a run's config.json: replay it
        options.update(values["config"])
        if values.get("world_size", 1) > 1:
            options["num_processes"] = values["world_size"]
        values = {key: value for key, value in values.items() if key not in RUN_RECORD}
    options.update(values)
    run_options = {key: options.pop(key) for key in RUN_OPTIONS if key in options}
    try:
        check_keys(options)
    except TypeError as exc:
        raise ValueError(f"{path}: {exc} or a run option ({', '.join(RUN_OPTIONS)})") from None
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    result = ConfigFile(config={key: value for key, value in options.items() if key in known}, **run_options)
    if result.run_dir is not None:
        result.run_dir = Path(result.run_dir)
    return result
