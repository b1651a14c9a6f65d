"""The package-owned files staged beside every batch script."""

from __future__ import annotations

from dataclasses import dataclass

from slurm_image.domain.canonical import sha256_hex
from slurm_image.domain.plan import RuntimeDigests

INSPECTOR_NAME = "inspect_image.py"
RC_NAME = "enroot.rc"


@dataclass(frozen=True)
class RuntimeFiles:
    """The inspector program and the Enroot rc file, as bytes."""

    inspector: bytes
    rc: bytes

    def digests(self) -> RuntimeDigests:
        return RuntimeDigests(
            inspector_sha256=sha256_hex(self.inspector), rc_sha256=sha256_hex(self.rc)
        )
