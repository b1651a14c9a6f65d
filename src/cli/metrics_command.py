"""``slurm-image metrics [--textfile PATH]`` (docs/cli.md; docs/operations.md, "Metrics"): the
store's figures in Prometheus's text format on stdout, or written atomically to PATH for
node_exporter's textfile collector; ``--json``: the same numbers as one object.

Cron runs it every minute, so it goes through no container (dependency-injector imports
asyncio) and loads nothing of the scheduler or the lifecycle's use cases: the validated
profile (for the layer cache's settings), the store's read-only adapter and its history (the
factories of the container's ``store_reader`` and ``history`` providers), ``CollectMetrics``.
``prometheus_client`` is loaded only when the text is written."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

from slurm_image.cli.arguments import Options, Parser
from slurm_image.cli.command_failure import CommandFailed, next_step

if TYPE_CHECKING:
    from argparse import Namespace

    from slurm_image.application.metrics import StoreMetrics


def add_options(parser: Parser) -> None:
    parser.add_argument(
        "--textfile",
        metavar="PATH",
        help="Write the text atomically to PATH (a .prom file in node_exporter's textfile"
        " directory) instead of stdout.",
    )


def collect(options: Options) -> StoreMetrics:
    """The snapshot of the selected profile's store."""
    from slurm_image.composition import factories
    from slurm_image.composition.profile_loader import (
        layer_cache_bound,
        load_profile,
        profile_path,
    )

    profile, _ = load_profile(profile_path(options.profile, os.environ), cluster=options.cluster)
    store = factories.store_reader(profile.workspace_root)
    metrics = factories.metrics(
        store=store, history=factories.history(store), clock=factories.clock()
    )
    return metrics(layer_cache=layer_cache_bound(profile), store_name=profile.store_name)


def run(options: Options, args: Namespace) -> None:
    """The store's figures for Prometheus, from the store and its history alone (no
    scheduler): aliases, artifacts, layer cache, attempts, outcomes and exit codes of jobs."""
    from slurm_image.cli import textfile

    try:
        if args.textfile is not None:
            textfile.check_textfile(args.textfile)
        metrics = collect(options)
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
