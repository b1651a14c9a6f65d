"""Keep the gateway's web framework out of the commands that do not serve it.

dependency-injector's ``wiring`` module (imported with its containers) imports FastAPI and
Starlette whenever they are installed, to recognise their markers in the functions it wires;
FastAPI then imports much of pydantic's machinery: about 130 ms at every command that builds the
container (bench/RESULTS.md). The product wires nothing with ``@inject`` (the gateway's routes
name their dependencies themselves), so the container is imported with both hidden, and they
load only where they are used: ``slurm-image serve``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

HIDDEN = ("fastapi", "starlette")


@contextmanager
def without_web_framework() -> Iterator[None]:
    """While the block runs, importing FastAPI or Starlette fails (unless it was imported
    before), as if they were not installed; afterwards they import as usual."""
    hidden = [name for name in HIDDEN if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's "not here"
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
