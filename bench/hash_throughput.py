"""``hash_vs_openssl`` and ``job_hash_vs_openssl``: the product's hasher, and the ``hash_file``
function of a rendered job run by bash, against ``openssl dgst -sha256`` on one large file
(warm page cache). bench/hashing.py compares more hashers, with their memory."""

from __future__ import annotations

import re
from pathlib import Path

from timing import rounds, run_checked

from slurm_image.adapters.sha256_hasher import Sha256Hasher


def hash_function(script: str) -> str:
    """The ``hash_file`` function of a rendered job, as its text."""
    match = re.search(r"^hash_file\(\) \{\n.*?^\}\n", script, re.MULTILINE | re.DOTALL)
    if match is None:
        raise SystemExit("the rendered script has no hash_file function")
    return match.group(0)


def hashing(path: Path, script: str, repetitions: int) -> dict[str, float]:
    expected = (
        run_checked(["openssl", "dgst", "-sha256", "-r", str(path)]).stdout.split()[0].decode()
    )
    job_code = f'set -euo pipefail\n{hash_function(script)}hash_file <"$1"\n'

    def openssl() -> None:
        run_checked(["openssl", "dgst", "-sha256", "-r", str(path)])

    def ours() -> None:
        if Sha256Hasher().digest_file(str(path)).sha256 != expected:
            raise SystemExit("Sha256Hasher disagrees with openssl")

    def job() -> None:
        out = run_checked(["bash", "-c", job_code, "bash", str(path)]).stdout.decode().strip()
        if out != expected:
            raise SystemExit(f"the job's hash_file gave {out!r}, not {expected}")

    times = rounds({"openssl": openssl, "ours": ours, "job": job}, repetitions)
    return {
        "hash_vs_openssl": times["openssl"] / times["ours"],
        "job_hash_vs_openssl": times["openssl"] / times["job"],
    }
