"""Frameworks of the conformance matrix that run in their own cached environments (issue 24, section 3).

Each subfolder is one framework: ``framework.py`` (its :class:`~tests.frameworks.matrix_table.Framework`
record as ``FRAMEWORK`` and its expected cells as ``CELLS``), the environment's pins
(``requirements.txt`` for Python, with an optional ``requirements.nodeps.txt`` installed ``--no-deps``;
``package.json`` for Node.js) and the runner that runs the framework
inside that environment (``runner.py`` / ``runner.mjs``, the protocol of ``runner_common``). ``envs``
makes the environments and runs the runners; the matrix test plans what they wrote through all three doors.
"""

from __future__ import annotations

import importlib
from pathlib import Path

HERE = Path(__file__).resolve().parent


def framework_modules() -> list:
    """The ``framework`` module of every subfolder that has one, in folder-name order."""
    found = []
    for folder in sorted(p for p in HERE.iterdir() if (p / "framework.py").is_file()):
        found.append(importlib.import_module(f"tests.frameworks.isolated.{folder.name}.framework"))
    return found
