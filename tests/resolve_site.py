"""A site for the tests of ``resolve``, ``import --resolve`` and ``outdated`` run as a user
runs them: a workspace, a profile (the fake scheduler unless a test brings its own submitter
table), a netrc of the user's own under ``$HOME``, the CA the registry's certificate is
trusted by (``SSL_CERT_FILE``, which the product honours as Enroot's curl does), and the
command line in a fresh process (``support.run_cli``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from clusters import enroot_table
from support import run_cli


class ResolveSite:
    def __init__(
        self,
        base: Path,
        *,
        allow_http: bool = False,
        netrc: str | None = None,
        ca_file: Path | None = None,
        profile_tail: str = '[submitter]\nkind = "fake"\n',
        image_build: str = "",
        env: dict[str, str] | None = None,
    ) -> None:
        self.base = base
        self.workspace = base / "ws"
        base.mkdir(parents=True, exist_ok=True)
        self.workspace.mkdir(mode=0o700)
        enroot = ['credentials_file = "~/.config/enroot/.credentials"'] if netrc is not None else []
        (base / "slurm-image.toml").write_text(
            f'workspace_root = "{self.workspace}"\n'
            "[image_build]\n"
            'partition = "build"\ncpus_per_task = 1\nmemory = "1G"\ntime_limit = "0:15:00"\n'
            + image_build
            + enroot_table(*enroot, allow_http=allow_http)
            + profile_tail
        )
        if netrc is not None:
            path = base / ".config" / "enroot" / ".credentials"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(netrc)
            path.chmod(0o600)
        self.env = {"HOME": str(base), **(env or {})}
        if ca_file is not None:
            self.env["SSL_CERT_FILE"] = str(ca_file)

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, cwd=self.base, env=self.env, inherit=False, timeout=timeout)

    def json(self, *args: str, timeout: float = 120) -> dict[str, Any]:
        done = self.run(*args, "--json", timeout=timeout)
        assert done.returncode == 0, done.stderr
        data: dict[str, Any] = json.loads(done.stdout)
        return data

    def staged(self) -> list[str]:
        """The attempts staged in the workspace."""
        jobs = self.workspace / "images" / ".tmp" / "jobs"
        return sorted(path.name for path in jobs.iterdir()) if jobs.is_dir() else []
