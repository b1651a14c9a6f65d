"""Load the package-owned runtime files (inspector and rc) from the installed package."""

from __future__ import annotations

from importlib import resources

from slurm_image.domain.runtime import INSPECTOR_NAME, RC_NAME, RuntimeFiles


def load_runtime_files() -> RuntimeFiles:
    package = resources.files("slurm_image.inspector")
    return RuntimeFiles(
        inspector=package.joinpath(INSPECTOR_NAME).read_bytes(),
        rc=package.joinpath(RC_NAME).read_bytes(),
    )
