"""The command line asking a gateway over TCP makes each request's MUNGE credential with the
munged that ``SLURM_IMAGE_MUNGE_SOCKET`` names (docs/cli.md, "Environment overrides"): a socket
nobody serves is named in the one error line, before any request that needs an identity is sent
(only ``/v1/about``, which tells the uid the credential is restricted to)."""

from __future__ import annotations

from pathlib import Path

from gateway_lab import gateway_lab
from support import run_cli


def test_the_credential_is_made_with_the_munged_the_environment_names(tmp_path: Path) -> None:
    socket = str(tmp_path / "munge.socket")

    with gateway_lab() as lab:
        done = run_cli(
            "--gateway",
            lab.url,
            "list",
            cwd=tmp_path,
            env={"SLURM_IMAGE_MUNGE_SOCKET": socket},
            inherit=False,
        )
        refused = [event for event in lab.history() if event["event"] == "refused"]

    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith(f"slurm-image: error: {socket}: munge could not make"), (
        done.stderr
    )
    assert refused == [], "no request without its credential reached the gateway"
