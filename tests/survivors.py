"""Processes an image leaves behind in states a reaper walking /proc misses (a zombie thread-group
leader with a live thread; a process chrooted into /proc), built from
``fixtures/survivor/survivor.c``, and how tests find and end them."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from contextlib import suppress
from pathlib import Path

from parallel import worker_index
from support import unavailable

SOURCE = Path(__file__).resolve().parent / "fixtures" / "survivor" / "survivor.c"
NAME = f"img-surv-{worker_index()}" if os.environ.get("PYTEST_XDIST_WORKER") else "img-survivor"
"""The survivor's comm: the same for the zombie leader and its live thread; each xdist worker's
own (at most 15 characters), so that a worker ends only the survivors of its own tests."""


def build_survivor(directory: Path) -> Path:
    """The survivor, linked statically (images have no C library of their own here)."""
    if shutil.which("gcc") is None:
        unavailable("gcc missing: the survivor processes are built from C (apt-get install gcc)")
    target = directory / "survivor"
    built = subprocess.run(
        [
            "gcc",
            "-static",
            "-O2",
            "-pthread",
            f'-DSURVIVOR_NAME="{NAME}"',
            "-o",
            str(target),
            str(SOURCE),
        ],
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        unavailable(f"cannot build a static survivor (libc6-dev?): {built.stderr.strip()}")
    return target


def survivors() -> list[int]:
    """Thread groups with a live task named ``NAME`` (a zombie leader's live thread counts; a
    process that is only waiting to be reaped does not)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with suppress(OSError):
            for task in (entry / "task").iterdir():
                stat = (task / "stat").read_text()
                state = stat[stat.rindex(")") + 2]
                if state not in "ZX" and (task / "comm").read_text().strip() == NAME:
                    found.append(int(entry.name))
                    break
    return sorted(found)


def end_survivors() -> None:
    """SIGKILL every survivor, and wait (a few seconds at most) until none lives."""
    deadline = time.monotonic() + 5
    while (alive := survivors()) and time.monotonic() < deadline:
        for pid in alive:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
