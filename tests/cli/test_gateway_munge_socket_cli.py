"""The command line asking a gateway over TCP makes each request's MUNGE credential with the
munged that ``SLURM_IMAGE_MUNGE_SOCKET`` names (docs/cli.md, "Environment overrides"): a socket
nobody serves is named in the one error line, before any request is sent."""

from __future__ import annotations

from pathlib import Path

from support import run_cli


def test_the_credential_is_made_with_the_munged_the_environment_names(tmp_path: Path) -> None:
    socket = str(tmp_path / "munge.socket")

    done = run_cli(
        "--gateway",
        "https://127.0.0.1:9",
        "list",
        cwd=tmp_path,
        env={"SLURM_IMAGE_MUNGE_SOCKET": socket},
        inherit=False,
    )

    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith(f"slurm-image: error: {socket}: munge could not make"), (
        done.stderr
    )
