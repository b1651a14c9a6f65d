"""``slurm-image serve``: run the site's gateway (docs/gateway.md), as the account that owns the
store. Everything it needs is the site's profile (``--profile``, as every command) and where to
listen; the site policy and ``[gateway]`` rules apply to every request. The options are read
here; the gateway is built and started by the composition root (``composition.serve``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from slurm_image.cli.arguments import Options, Parser
from slurm_image.cli.command_failure import CommandFailed, next_step
from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.gateway_workers import DEFAULT_WORKERS, MAX_WORKERS, workers

if TYPE_CHECKING:
    from argparse import Namespace

DEFAULT_LISTEN = "unix:/run/slurm-image/gateway.sock"
DEFAULT_MUNGE_SOCKET = "/run/munge/munge.socket.2"
DEFAULT_REPLAY_FILE = "/var/lib/slurm-image/accepted-credentials"


def add_options(parser: Parser) -> None:
    parser.add_argument(
        "--listen",
        metavar="WHERE",
        action="append",
        help=f"unix:PATH, https://HOST:PORT or http://127.0.0.1:PORT (loopback, for tests);"
        f" repeat for several (default {DEFAULT_LISTEN}).",
    )
    parser.add_argument("--tls-cert", metavar="PATH", help="Certificate for https:// listeners.")
    parser.add_argument("--tls-key", metavar="PATH", help="Its private key.")
    parser.add_argument(
        "--munge-socket",
        metavar="PATH",
        default=DEFAULT_MUNGE_SOCKET,
        help=f"munged's socket, to decode the credentials of TCP requests (default"
        f" {DEFAULT_MUNGE_SOCKET}).",
    )
    parser.add_argument(
        "--replay-file",
        metavar="PATH",
        default=DEFAULT_REPLAY_FILE,
        help=f"The gateway's own file of the MUNGE credentials it accepted, so that a restart"
        f" refuses them still (default {DEFAULT_REPLAY_FILE}; used with a TCP listener; each"
        f" further worker keeps PATH.2, PATH.3 and on).",
    )
    parser.add_argument(
        "--workers",
        metavar="N",
        type=_workers,
        default=DEFAULT_WORKERS,
        help=f"Processes serving the listeners, 1 to {MAX_WORKERS} (default {DEFAULT_WORKERS});"
        " each counts the gateway's limits on its own (docs/gateway.md, Limits).",
    )


def _workers(text: str) -> int:
    try:
        return workers(text)
    except InvalidRequest as error:
        raise argparse.ArgumentTypeError(error.rule) from None


def run(options: Options, args: Namespace) -> None:
    """Run the gateway every user asks: imports by the store's account, for each requester."""
    from slurm_image.cli.services import Serving, services

    serving = Serving(
        listen=args.listen or [DEFAULT_LISTEN],
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        munge_socket=args.munge_socket,
        replay_file=args.replay_file,
        workers=args.workers,
    )
    try:
        services().serve(options, serving)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
