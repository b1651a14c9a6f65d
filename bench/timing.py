"""What every figure of ``bench/run.py`` is timed with: the product's console script and
interpreter, the environment their processes get, and rounds that run every contestant once in
turn (a noisy neighbour slows a figure and its baseline alike), and how a figure reads against
its goal."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
PYTHON = str(Path(sys.executable))
CLI = str(BIN / "slurm-image")


def child_environment() -> dict[str, str]:
    """The caller's environment as a user has it: bytecode cached, as after ``pip install``
    (a ``PYTHONDONTWRITEBYTECODE`` left over from a test harness would recompile every module
    at every start), and no ``SLURM_IMAGE_*`` setting of the caller's."""
    return {
        key: value
        for key, value in os.environ.items()
        if key != "PYTHONDONTWRITEBYTECODE" and not key.startswith("SLURM_IMAGE_")
    }


ENV = child_environment()


def run_checked(argv: Sequence[str], **options: Any) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(argv, env=options.pop("env", ENV), capture_output=True, **options)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return done


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def rounds(contestants: dict[str, Callable[[], object]], count: int) -> dict[str, float]:
    """Medians of ``count`` rounds, each timing every contestant once, in turn."""
    samples: dict[str, list[float]] = {name: [] for name in contestants}
    for _ in range(count):
        for name, action in contestants.items():
            samples[name].append(timed(action))
    return {name: statistics.median(values) for name, values in samples.items()}


def verdict(goal: tuple[str, float] | None, value: float) -> str:
    """What a figure says of its goal (``(">=" | "<=" | "==", bound)``), or nothing without one."""
    if goal is None:
        return ""
    kind, bound = goal
    met = value >= bound if kind == ">=" else value <= bound if kind == "<=" else value == bound
    return f"  (goal {kind} {bound}: {'met' if met else 'MISSED'})"
