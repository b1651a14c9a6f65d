"""slurm-image-lifecycle: digest-pinned container images to verified Enroot squashfs files on Slurm.

Installed, the folders under ``src/`` form this one package: ``slurm_image.domain``,
``slurm_image.ports``, ``slurm_image.application``, ``slurm_image.adapters``,
``slurm_image.wire``, ``slurm_image.cli``, ``slurm_image.gateway``,
``slurm_image.composition`` and ``slurm_image.inspector``. Importing it imports nothing else;
``slurm_image.Lifecycles`` (the Python API, ``composition.api``) is loaded on first use.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "Lifecycles":
        from slurm_image.composition.api import Lifecycles

        return Lifecycles
    raise AttributeError(f"module 'slurm_image' has no attribute {name!r}")
