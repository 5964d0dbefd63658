"""MkDocs hook: add the reference pages generated from the code to the site at build time.

``mkdocs build`` and ``mkdocs serve`` (``mkdocs.yml``: ``hooks:``) run ``scripts/gen_docs_reference.py``
in a fresh interpreter on every build and add its pages as in-memory files, so a plain
``mkdocs build --strict`` needs no step before it, nothing generated sits in ``docs/`` to go stale, and
a server left running picks up a changed flag, proto comment or metric on its next rebuild. A file on
disk at a generated page's path is a mistake (it would be served instead of the code's truth): it is
dropped with a warning, which fails a strict build.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.reference")

GENERATOR = Path(__file__).resolve().parent / "gen_docs_reference.py"


def generated_pages() -> dict[str, str]:
    """``{path under docs/: markdown}`` from the generator, run in its own interpreter."""
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--json"],
        cwd=GENERATOR.parent.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise PluginError(f"{GENERATOR.name} failed:\n{result.stderr.strip()}")
    pages: dict[str, str] = json.loads(result.stdout)
    return pages


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, markdown in generated_pages().items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            log.warning("docs/%s is generated from the code; delete the file on disk", path)
            files.remove(existing)
        files.append(File.generated(config, path, content=markdown))
    return files
