"""``slurm-image serve``: run the site's gateway (docs/gateway.md), as the account that owns the
store. Everything it needs is the site's profile (``--profile``, as every command) and where to
listen; the site policy and ``[gateway]`` rules apply to every request."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slurm_image.entrypoints.arguments import Options, Parser
from slurm_image.entrypoints.command_failure import CommandFailed, next_step

if TYPE_CHECKING:
    from argparse import Namespace
    from collections.abc import Sequence

    from fastapi import FastAPI

    from slurm_image.entrypoints.api import Lifecycles
    from slurm_image.entrypoints.gateway.serve import Listener

DEFAULT_LISTEN = "unix:/run/slurm-image/gateway.sock"
DEFAULT_MUNGE_SOCKET = "/run/munge/munge.socket.2"


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


def run(options: Options, args: Namespace) -> None:
    """Run the gateway every user asks: imports by the store's account, for each requester."""
    try:
        from slurm_image.entrypoints.gateway.serve import parse_listener

        listeners = [parse_listener(text) for text in args.listen or [DEFAULT_LISTEN]]
        lifecycles, app = build(options, munge_socket=args.munge_socket, listeners=listeners)
        from slurm_image.entrypoints.gateway.serve import serve

        serve(app, lifecycles, listeners, tls_cert=args.tls_cert, tls_key=args.tls_key)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error


def build(
    options: Options, *, munge_socket: str, listeners: Sequence[Listener]
) -> tuple[Lifecycles, FastAPI]:
    """The service account's verbs over the site's profile, and the gateway's application."""
    from slurm_image.adapters.munge import MungeAuthenticator
    from slurm_image.entrypoints.api import Lifecycles
    from slurm_image.entrypoints.gateway.app import Gateway, create_app
    from slurm_image.entrypoints.gateway.who import Who

    lifecycles = Lifecycles.from_profile(options.profile, cluster=options.cluster)
    lifecycles.container.submitter_ready()
    lifecycles.open_store()
    plain_http = any(listener.kind == "http" for listener in listeners)
    who = Who(
        lifecycles.container.accounts(),
        MungeAuthenticator(socket=munge_socket),
        plain_http_ok=plain_http,
    )
    return lifecycles, create_app(Gateway(lifecycles=lifecycles, who=who))
