"""``slurm-image serve``: run the site's gateway (docs/gateway.md), as the account that owns the
store. Everything it needs is the site's profile (``--profile``, as every command) and where to
listen; the site policy and ``[gateway]`` rules apply to every request."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from slurm_image.cli.arguments import Options, Parser
from slurm_image.cli.command_failure import CommandFailed, next_step
from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.gateway_workers import DEFAULT_WORKERS, MAX_WORKERS, workers

if TYPE_CHECKING:
    from argparse import Namespace
    from collections.abc import Sequence

    from fastapi import FastAPI

    from slurm_image.composition.api import Lifecycles
    from slurm_image.gateway.serve import Listener

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
    try:
        from slurm_image.gateway.serve import parse_listener

        listeners = [parse_listener(text) for text in args.listen or [DEFAULT_LISTEN]]
        if args.workers > 1:
            _serve_workers(options, args, listeners)
            return
        lifecycles, app = build(
            options,
            munge_socket=args.munge_socket,
            listeners=listeners,
            replay_file=args.replay_file,
        )
        from slurm_image.gateway.serve import serve

        serve(app, lifecycles, listeners, tls_cert=args.tls_cert, tls_key=args.tls_key)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error


def _serve_workers(options: Options, args: Namespace, listeners: Sequence[Listener]) -> None:
    """``--workers N``: the verbs made here, each worker's application in the worker."""
    from slurm_image.gateway.workers import replay_files, serve_workers

    lifecycles = service_verbs(options)
    files = replay_files(args.replay_file, args.workers)

    def application(index: int) -> FastAPI:
        others = files[:index] + files[index + 1 :]
        return gateway_app(
            lifecycles,
            munge_socket=args.munge_socket,
            listeners=listeners,
            replay_file=files[index],
            also=others,
        )

    serve_workers(
        lifecycles,
        application,
        listeners,
        args.workers,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
    )


def build(
    options: Options,
    *,
    munge_socket: str,
    listeners: Sequence[Listener],
    replay_file: str = DEFAULT_REPLAY_FILE,
) -> tuple[Lifecycles, FastAPI]:
    """The service account's verbs over the site's profile, and the gateway's application:
    with a TCP listener, the credentials it accepts are kept in ``replay_file`` too."""
    lifecycles = service_verbs(options)
    app = gateway_app(
        lifecycles, munge_socket=munge_socket, listeners=listeners, replay_file=replay_file
    )
    return lifecycles, app


def service_verbs(options: Options) -> Lifecycles:
    """The service account's verbs over the site's profile, its scheduler and store ready."""
    from slurm_image.composition.api import Lifecycles

    lifecycles = Lifecycles.from_profile(options.profile, cluster=options.cluster)
    lifecycles.container.submitter_ready()
    lifecycles.open_store()
    return lifecycles


def gateway_app(
    lifecycles: Lifecycles,
    *,
    munge_socket: str,
    listeners: Sequence[Listener],
    replay_file: str,
    also: Sequence[str] = (),
) -> FastAPI:
    """The gateway's application over ``lifecycles``: with a TCP listener, the credentials it
    accepts are kept in ``replay_file`` too (and those in ``also`` refused from the start)."""
    from slurm_image.adapters.accepted_credentials_file import AcceptedCredentialsFile
    from slurm_image.adapters.munge import MungeAuthenticator
    from slurm_image.adapters.system_clock import SystemClock
    from slurm_image.gateway.app import Gateway, create_app
    from slurm_image.gateway.who import Who

    plain_http = any(listener.kind == "http" for listener in listeners)
    tcp = any(listener.kind != "unix" for listener in listeners)
    accepted = AcceptedCredentialsFile(replay_file, SystemClock(), also=also) if tcp else None
    who = Who(
        lifecycles.container.accounts(),
        MungeAuthenticator(socket=munge_socket, accepted=accepted),
        plain_http_ok=plain_http,
    )
    return create_app(Gateway(lifecycles=lifecycles, who=who))
