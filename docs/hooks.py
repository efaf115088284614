"""MkDocs hooks: what the site shows that lives outside ``docs/`` is taken from where it lives, never copied by hand.

- The benchmark figures (``benchmarks/results/figures/*.png``) as ``benchmarks/figures/``, and ``examples/*.py``
  as ``examples/``: pages link to them where the repository keeps them.
- ``<!-- config-reference -->`` becomes the config's reference, generated from its concerns
  (:data:`vecfast.trainers.config.CONCERNS`): each key's default and the docstring under its field, as
  ``vecfast train --help`` shows them.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = {"benchmarks/figures": ROOT / "benchmarks" / "results" / "figures", "examples": ROOT / "examples"}
CONFIG_MARKER = "<!-- config-reference -->"


def on_files(files, config):
    for site_dir, source in OUTSIDE.items():
        for path in sorted(source.glob("*.png")) + sorted(source.glob("*.py")):
            files.append(File.generated(config, f"{site_dir}/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown, page, config, files):
    if CONFIG_MARKER not in markdown:
        return markdown
    return markdown.replace(CONFIG_MARKER, config_reference())


def config_reference() -> str:
    """Markdown: a section per concern, a row per key (its default and docstring)."""
    from vecfast.trainers.config import CONCERNS, field_docs

    docs, out = field_docs(), []
    for concern in CONCERNS:
        out += [f"## {concern.GROUP}", "", inspect.getdoc(concern) or "", "", "| key | default | what it does |"]
        out.append("| --- | --- | --- |")
        for f in dataclasses.fields(concern):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            text = docs.get(f.name, "").replace("|", "\\|")
            out.append(f"| `{f.name}` | `{default!r}` | {text} |")
        out.append("")
    return "\n".join(out)
