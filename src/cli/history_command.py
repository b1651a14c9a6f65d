"""``history [NAME] [--since T] [--follow]``: the store's history, newest last (docs/cli.md,
"history"; docs/design.md, "History"). Read as ``show`` reads the store
(``composition.lookup``): no container, no lock, nothing of the scheduler. ``--follow`` keeps
printing each event appended, one line each (``--json`` and ``--quiet``: the line as stored),
flushed at once for a log shipper, until SIGINT or SIGTERM, which end it with exit 0 after the
line in hand, or until its reader goes away."""

from __future__ import annotations

import signal
import sys
import threading
from typing import TYPE_CHECKING

from slurm_image.cli.arguments import Options, Parser
from slurm_image.cli.command_failure import CommandFailed, next_step
from slurm_image.cli.output import emit, table
from slurm_image.cli.services import history_follower, history_reader

if TYPE_CHECKING:
    from argparse import Namespace
    from datetime import datetime

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
    parser.add_argument(
        "--follow",
        action="store_true",
        help="Then print each event as it is appended (with --json, one JSON line each),"
        " until interrupted (SIGINT, SIGTERM: exit 0).",
    )


def run(options: Options, args: Namespace) -> None:
    """The store's history: who changed what users get, and when; newest last."""
    from slurm_image.domain.history import event_line, parse_since

    try:
        since = None if args.since is None else parse_since(args.since)
        if args.follow:
            _follow(options, args.name, since)
            return
        read = history_reader(options)(args.name, since=since)
    except CommandFailed:
        raise
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


def _follow(options: Options, name: str | None, since: datetime | None) -> None:
    """Print every event and each one appended, until SIGINT or SIGTERM (see the module
    docstring)."""
    from slurm_image.domain.history import event_line

    stop = threading.Event()

    def stopping(signum: int, frame: object) -> None:
        stop.set()

    def write(event: HistoryEvent) -> None:
        if options.json or options.quiet:
            line = event_line(event).decode()
        else:
            line = "  ".join(_row(event)) + "\n"
        try:
            sys.stdout.write(line)
            sys.stdout.flush()
        except BrokenPipeError:
            stop.set()  # the reader went away: nothing more to say to anyone

    follower = history_follower(options)
    previous = {signum: signal.signal(signum, stopping) for signum in _STOPPING}
    try:
        follower(write, stop.wait, name, since=since)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if stop.is_set():
        _quiet_stdout()


_STOPPING = (signal.SIGINT, signal.SIGTERM)


def _quiet_stdout() -> None:
    """A stdout whose reader went away would fail again when the interpreter flushes it at
    exit: point it at /dev/null once the last line is out (or could not be)."""
    import os

    try:
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
