"""The start-up of the command line's commands against ``python -c pass`` (``cli_help``,
``show``, ``show_missing``, ``dry_run``, ``submit``, ``metrics``), and the two floors below
which no command that validates through the container can go."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

from timing import CLI, ENV, PYTHON, rounds, run_checked
from workloads import Site

FLOOR_MODEL = """\
from pydantic import BaseModel, ConfigDict
class Floor(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    name: str
Floor.model_validate({"name": "floor"})
"""
FLOOR_CONTAINER = (
    "from slurm_image.composition.lean_imports import without_web_framework\n"
    "with without_web_framework():\n"
    "    import dependency_injector.containers\n" + FLOOR_MODEL
)
"""The container as the product imports it (composition/lean_imports.py: with the gateway's web
framework hidden from dependency-injector's wiring)."""


def commands(
    site: Site, repetitions: int, alias: str, aliases: int
) -> tuple[dict[str, float], str]:
    """The CLI's commands against ``python -c pass`` (``show`` of the published ``alias``, one
    of ``aliases`` that ``metrics`` counts); also returns a rendered script."""
    profile = ["--profile", str(site.sbatch_profile)]
    source = f"registry.example.org/team/other:1@sha256:{'7' * 64}"
    dry_run = [CLI, *profile, "import", source, "--name", "dry", "--role", "client"]
    dry_run += ["--dry-run", "--json"]
    staged = iter(site.staged(repetitions + 1))
    calls_before = _calls(site)

    def submit() -> None:
        out = json.loads(run_checked([CLI, *profile, "--json", "submit", next(staged)]).stdout)
        if not out.get("job_id"):
            raise SystemExit(f"submit answered {out}")

    def show() -> None:
        out = json.loads(run_checked([CLI, *profile, "show", alias, "--json"]).stdout)
        if out["name"] != alias:
            raise SystemExit(f"show answered {out}")

    textfile = site.base / "slurm_image.prom"
    aliases_line = (
        f'slurm_image_aliases{{architecture="x86_64",role="client",store="{site.root}"}}'
        f" {aliases}.0\n"
    )

    def metrics() -> None:
        run_checked([CLI, *profile, "metrics", "--textfile", str(textfile)])
        if aliases_line not in textfile.read_text():
            raise SystemExit(f"metrics wrote no {aliases_line!r}")

    def show_missing() -> None:
        done = subprocess.run(
            [CLI, *profile, "show", "missing"], env=ENV, capture_output=True, check=False
        )
        if done.returncode != 2 or b"no alias missing is published" not in done.stderr:
            raise SystemExit(f"show of a missing alias answered {done}")

    contestants: dict[str, Callable[[], object]] = {
        "python": lambda: run_checked([PYTHON, "-c", "pass"]),
        "model": lambda: run_checked([PYTHON, "-c", FLOOR_MODEL]),
        "container": lambda: run_checked([PYTHON, "-c", FLOOR_CONTAINER]),
        "help": lambda: run_checked([CLI, "--help"]),
        "show": show,
        "show_missing": show_missing,
        "dry_run": lambda: run_checked(dry_run),
        "submit": submit,
        "metrics": metrics,
    }
    for action in contestants.values():  # warm: bytecode written, page cache filled
        action()
    times = rounds(contestants, repetitions)
    if _calls(site) - calls_before != repetitions + 1:
        raise SystemExit("submit did not call the sbatch stub once per submission")
    script = json.loads(run_checked(dry_run).stdout)["script"]
    base = times["python"]
    figures = {
        "cli_help_vs_python": times["help"] / base,
        "floor_model_vs_python": times["model"] / base,
        "floor_container_vs_python": times["container"] / base,
        "show_vs_python": times["show"] / base,
        "show_missing_vs_python": times["show_missing"] / base,
        "dry_run_vs_python": times["dry_run"] / base,
        "submit_vs_python": times["submit"] / base,
        "metrics_vs_python": times["metrics"] / base,
    }
    return figures | {"python_ms": base * 1000}, script


def _calls(site: Site) -> int:
    if not site.sbatch_calls.exists():
        return 0
    return len(site.sbatch_calls.read_text().splitlines())
