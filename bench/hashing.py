"""Hashing speed and memory: our Sha256Hasher against sha256sum and openssl, side by side.

Usage: .venv/bin/python bench/hashing.py [--size-mib N] [--rounds R] [--write FILE]

Run with the interpreter of the environment the product is installed in: it imports
``slurm_image`` as installed. ``bench/run.py`` gives the same comparison as one figure.

Every round times each contestant once, in turn, on the same file (warm page cache), so a
noisy neighbour slows all of them alike; the report gives medians and ratios to sha256sum.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from slurm_image.adapters.sha256_hasher import Sha256Hasher


def _command(argv: list[str]) -> Callable[[str], str]:
    def run(path: str) -> str:
        out = subprocess.run([*argv, path], check=True, capture_output=True, text=True).stdout
        return out.split()[0]

    return run


def _ours(path: str) -> str:
    return Sha256Hasher().digest_file(path).sha256


def _file_digest(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _peak_rss_kib(code: str, path: str) -> int:
    """Peak RSS of a fresh process running ``code`` on ``path``."""
    probe = f"import resource, subprocess, sys\n{code}\n"
    out = subprocess.run(
        [sys.executable, "-c", probe, path], check=True, capture_output=True, text=True
    )
    return int(out.stdout.split()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()

    contestants: dict[str, Callable[[str], str]] = {"sha256sum": _command(["sha256sum"])}
    if shutil.which("openssl"):
        contestants["openssl dgst -sha256"] = _command(["openssl", "dgst", "-sha256", "-r"])
    contestants["Sha256Hasher (ours)"] = _ours
    contestants["hashlib.file_digest"] = _file_digest

    with tempfile.TemporaryDirectory(prefix="slurm-image-bench-") as tmp:
        path = str(Path(tmp) / "image.sqsh")
        with open(path, "wb") as handle:
            for _ in range(args.size_mib):
                handle.write(os.urandom(1 << 20))
        expected = _command(["sha256sum"])(path)  # also warms the page cache
        times: dict[str, list[float]] = {name: [] for name in contestants}
        for _ in range(args.rounds):
            for name, run in contestants.items():
                start = time.perf_counter()
                digest = run(path)
                times[name].append(time.perf_counter() - start)
                if digest != expected:
                    raise SystemExit(f"{name} gave {digest}, expected {expected}")

        idle = _peak_rss_kib(
            "import slurm_image.adapters.sha256_hasher\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)",
            path,
        )
        ours = _peak_rss_kib(
            "from slurm_image.adapters.sha256_hasher import Sha256Hasher\n"
            "Sha256Hasher().digest_file(sys.argv[1])\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)",
            path,
        )
        sha256sum = _peak_rss_kib(
            "subprocess.run(['sha256sum', sys.argv[1]], check=True, capture_output=True)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
            path,
        )

    base = statistics.median(times["sha256sum"])
    mib = args.size_mib
    lines = [
        "# Benchmarks",
        "",
        "Written by `bench/hashing.py`; numbers are ratios against a baseline run side by side",
        "in the same rounds, so they compare, they do not promise.",
        "",
        "## Hashing a .sqsh (SHA-256)",
        "",
        f"File: {mib} MiB of random bytes, warm page cache; {args.rounds} rounds, each running",
        "every contestant once in turn. Machine: "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}.",
        "",
        "| contestant | median s | MiB/s | time vs sha256sum |",
        "|---|---|---|---|",
    ]
    for name, samples in times.items():
        median = statistics.median(samples)
        lines.append(f"| {name} | {median:.3f} | {mib / median:.0f} | {median / base:.2f}x |")
    lines += [
        "",
        "Peak memory (RSS, KiB): our hasher's process while hashing "
        f"{ours}, the same interpreter idle {idle}, so hashing adds {max(0, ours - idle)} KiB; "
        f"sha256sum's whole process {sha256sum} KiB.",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    if args.write:
        args.write.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
