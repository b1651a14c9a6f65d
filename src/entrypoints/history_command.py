"""``history [NAME] [--since T]``: the store's history, newest last (docs/cli.md, "history";
docs/design.md, "History"). Read as ``show`` reads the store (``entrypoints.lookup``): no
container, no lock, nothing of the scheduler."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slurm_image.entrypoints.arguments import Options, Parser
from slurm_image.entrypoints.cli_output import emit, table
from slurm_image.entrypoints.command_api import history_reader
from slurm_image.entrypoints.command_failure import CommandFailed, next_step

if TYPE_CHECKING:
    from argparse import Namespace

    from slurm_image.domain.history import HistoryEvent

HEADERS = ("TIME", "EVENT", "ALIAS", "BY", "LIFECYCLE", "JOB", "ARTIFACT", "EXIT")
SHORT = 12
"""Characters of a digest the human form prints."""


def add_options(parser: Parser) -> None:
    parser.add_argument("name", metavar="NAME", nargs="?", help="Only this alias's events.")
    parser.add_argument(
        "--since",
        metavar="T",
        help="Only events at or after T: an ISO 8601 date or date and time (UTC unless it"
        " carries an offset).",
    )


def run(options: Options, args: Namespace) -> None:
    """The store's history: who changed what users get, and when; newest last."""
    from slurm_image.domain.history import event_line, parse_since

    try:
        since = None if args.since is None else parse_since(args.since)
        read = history_reader(options)(args.name, since=since)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    rows = [_row(event) for event in read.events]
    human = table(HEADERS, rows) if rows else "no events recorded"
    if read.skipped:
        human += f"\n({read.skipped} lines were no event: skipped)"
    emit(
        options,
        {
            "events": [event.model_dump(mode="json") for event in read.events],
            "skipped": read.skipped,
        },
        human,
        "".join(event_line(event).decode() for event in read.events).rstrip("\n"),
    )


def _row(event: HistoryEvent) -> tuple[str, ...]:
    where = "/".join(part for part in (event.alias, event.architecture) if part) or "-"
    artifact = event.artifact[:SHORT] if event.artifact else "-"
    if event.previous_artifact:
        artifact += f" (was {event.previous_artifact[:SHORT]})"
    return (
        event.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
        event.event,
        where,
        f"{event.user}@{event.host}",
        event.lifecycle_id or "-",
        event.job_id or "-",
        artifact,
        "-" if event.exit_code is None else str(event.exit_code),
    )
