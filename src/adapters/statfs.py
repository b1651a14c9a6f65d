"""``Filesystems`` through coreutils' ``stat -f``: its table of statfs magic numbers and names."""

from __future__ import annotations

import subprocess

from slurm_image.adapters.slurm_fields import bounded
from slurm_image.ports.filesystem import FilesystemError

_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


class StatfsFilesystems:
    def __init__(self, *, timeout_s: float = 30.0) -> None:
        self._timeout_s = timeout_s

    def type_name(self, path: str) -> str:
        try:
            done = subprocess.run(
                ["stat", "-f", "-c", "%T", "--", path],
                capture_output=True,
                text=True,
                env=_ENV,
                timeout=self._timeout_s,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise FilesystemError(
                field="workspace_root", rule=f"stat -f {path}: {bounded(str(exc))}"
            ) from None
        name = done.stdout.strip()
        if done.returncode != 0 or not name:
            raise FilesystemError(
                field="workspace_root",
                rule=f"stat -f {path}: {bounded(done.stderr) or 'no answer'}",
            )
        return name
