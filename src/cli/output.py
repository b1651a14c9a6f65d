"""What the commands print: one payload for ``--json``, the ids and paths for ``--quiet``, else
lines for people (``emit``); aligned columns (``table``); a published record's facts
(``describe_record``); and the live display of ``--wait`` and ``wait`` on a terminal
(``progress``), which alone loads rich."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurm_image.application.status import LifecycleStatus
    from slurm_image.application.wait import Progress
    from slurm_image.cli.arguments import Options


def emit(options: Options, payload: dict[str, Any], human: str, quiet: str | None = None) -> None:
    """``--json``: the payload; ``--quiet``: only ``quiet`` (ids, paths); else ``human``."""
    if options.json:
        print(json.dumps(payload, sort_keys=True))
    elif options.quiet:
        if quiet:
            print(quiet)
    else:
        print(human)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned to their widest cell, two spaces apart."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def describe_record(details: Mapping[str, Any]) -> str:
    """A published record's ``details()`` as aligned lines, its facts summed up."""
    facts = details["facts"]
    if "server" in facts:
        summary = f"{facts['server']['name']} {facts['server']['version']}"
    else:
        python = facts.get("python", {})
        count = len(facts.get("distributions", []))
        summary = (
            f"python {python.get('version')} ({python.get('implementation')}),"
            f" {count} distributions, pip {facts.get('installer', {}).get('version')}"
        )
    rows = [
        (key, summary if key == "facts" else details[key])
        for key in (
            "name",
            "role",
            "path",
            "sqsh_sha256",
            "source",
            "facts",
            "published_at",
            "lifecycle_id",
        )
    ]
    if details.get("stable_path"):
        rows.insert(3, ("by name", details["stable_path"]))
    resolved_from = details.get("resolved_from")
    if isinstance(resolved_from, Mapping):
        tag = f"{resolved_from.get('tag')} (resolved {resolved_from.get('resolved_at')})"
        rows.insert(5, ("tag", tag))
    if details.get("owner") or details.get("group"):
        owner = f"{details.get('owner') or 'the store owner'}"
        if details.get("group"):
            owner += f", group {details['group']}" + (
                " (private)" if details.get("private") else ""
            )
        rows.append(("owner", owner))
    signed_by = details.get("signed_by")
    if isinstance(signed_by, Mapping):
        signer = f"{signed_by.get('key_fingerprint')} ({signed_by.get('format')})"
        rows.insert(rows.index(("source", details["source"])) + 1, ("signed by", signer))
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"  {key.ljust(width)}  {value}" for key, value in rows)


@contextmanager
def progress(options: Options, *, enabled: bool = True) -> Iterator[Progress | None]:
    """A live display (one line per lifecycle) on a terminal; nothing otherwise."""
    if not enabled or options.json or options.quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    with Live(console=Console(stderr=True), transient=True, refresh_per_second=4) as live:

        def show(statuses: Sequence[LifecycleStatus], elapsed_s: float) -> None:
            table = Table(box=None, header_style="bold")
            for column in ("LIFECYCLE", "JOB", "STATE", "PROGRESS", "ELAPSED"):
                table.add_column(column)
            for status in statuses:
                table.add_row(
                    status.lifecycle_id,
                    status.job_id or "-",
                    status.state,
                    status.progress.describe() if status.progress else "-",
                    elapsed(elapsed_s),
                )
            live.update(table)

        yield show


def elapsed(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"
