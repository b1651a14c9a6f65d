"""``slurm-image metrics [--textfile PATH]`` (docs/cli.md; docs/operations.md, "Metrics"): the
store's figures in Prometheus's text format on stdout, or written atomically to PATH for
node_exporter's textfile collector; ``--json``: the same numbers as one object.

Cron runs it every minute, so the snapshot it is handed (``composition.command_api``) goes
through no container and loads nothing of the scheduler or the lifecycle's use cases.
``prometheus_client`` is loaded only when the text is written."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from slurm_image.cli.arguments import Options, Parser
from slurm_image.cli.command_failure import CommandFailed, next_step

if TYPE_CHECKING:
    from argparse import Namespace


def add_options(parser: Parser) -> None:
    parser.add_argument(
        "--textfile",
        metavar="PATH",
        help="Write the text atomically to PATH (a .prom file in node_exporter's textfile"
        " directory) instead of stdout.",
    )


def run(options: Options, args: Namespace) -> None:
    """The store's figures for Prometheus, from the store and its history alone (no
    scheduler): aliases, artifacts, layer cache, attempts, outcomes and exit codes of jobs."""
    from slurm_image.cli import textfile
    from slurm_image.cli.services import services

    try:
        if args.textfile is not None:
            textfile.check_textfile(args.textfile)
        metrics = services().store_metrics(options)
        text = b""
        if args.textfile is not None or not options.json:
            from slurm_image.wire.metrics_text import exposition

            text = exposition(metrics)
        if args.textfile is not None:
            textfile.write_textfile(args.textfile, text)
    except Exception as error:
        raise CommandFailed(error, _hint(error)) from error
    if options.json:
        print(json.dumps(metrics.as_dict(), sort_keys=True))
    elif args.textfile is None:
        sys.stdout.write(text.decode())


def _hint(error: BaseException) -> str | None:
    from slurm_image.ports.workspace import AccessDenied

    if isinstance(error, AccessDenied):
        return "the attempts in .tmp/jobs are the store owner's: run metrics as that user"
    return next_step(error)
