"""What ``slurm-image serve`` starts (``cli.serve_command`` reads its options): the service
account's verbs over the site's profile, the gateway's application over them with who is
asking (MUNGE, the accepted credentials' file), and the listeners serving it, in one process
or in ``--workers N``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slurm_image.cli.serve_command import DEFAULT_REPLAY_FILE

if TYPE_CHECKING:
    from collections.abc import Sequence

    from fastapi import FastAPI

    from slurm_image.cli.arguments import Options
    from slurm_image.cli.services import Serving
    from slurm_image.composition.api import Lifecycles
    from slurm_image.gateway.serve import Listener


def run(options: Options, serving: Serving) -> None:
    """Serve the gateway on ``serving.listen`` until it is stopped."""
    from slurm_image.gateway.serve import parse_listener

    listeners = [parse_listener(text) for text in serving.listen]
    if serving.workers > 1:
        _serve_workers(options, serving, listeners)
        return
    lifecycles, app = build(
        options,
        munge_socket=serving.munge_socket,
        listeners=listeners,
        replay_file=serving.replay_file,
    )
    from slurm_image.gateway.serve import serve

    serve(app, lifecycles, listeners, tls_cert=serving.tls_cert, tls_key=serving.tls_key)


def _serve_workers(options: Options, serving: Serving, listeners: Sequence[Listener]) -> None:
    """``--workers N``: the verbs made here, each worker's application in the worker."""
    from slurm_image.gateway.workers import replay_files, serve_workers

    lifecycles = service_verbs(options)
    files = replay_files(serving.replay_file, serving.workers)

    def application(index: int) -> FastAPI:
        others = files[:index] + files[index + 1 :]
        return gateway_app(
            lifecycles,
            munge_socket=serving.munge_socket,
            listeners=listeners,
            replay_file=files[index],
            also=others,
        )

    serve_workers(
        lifecycles,
        application,
        listeners,
        serving.workers,
        tls_cert=serving.tls_cert,
        tls_key=serving.tls_key,
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
    from slurm_image.gateway.app import create_app
    from slurm_image.gateway.state import Gateway
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
