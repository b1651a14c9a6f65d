"""Run the gateway (docs/gateway.md, "Deployment"): its listeners, uvicorn serving the API on
each, and the store settled when it starts and every ``SETTLE_EVERY_S`` after.

Listeners: ``unix:PATH`` (made 0666 in its directory, made 0755 if missing: the kernel says who
connects), ``https://HOST:PORT`` (with ``--tls-cert``/``--tls-key``), and ``http://HOST:PORT``
on a loopback address only. Several at once; the plain ones share one server, the TLS ones
another. With ``--workers N`` (``gateway.workers``) the sockets are bound once and served by N
processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import stat
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.gateway_settings import GatewayAddress, parse_address
from slurm_image.domain.untrusted_request import MAX_HEAD_BYTES
from slurm_image.gateway.peer import ConnectionLimits, guarded_protocol

if TYPE_CHECKING:
    from fastapi import FastAPI

    from slurm_image.gateway.site import SiteVerbs

log = logging.getLogger("slurm_image.gateway")

DEFAULT_SOCKET = "/run/slurm-image/gateway.sock"
SETTLE_EVERY_S = 10.0
FIELD = "listen"


Listener = GatewayAddress
"""Where the gateway listens (``domain.gateway_settings.GatewayAddress``)."""


def parse_listener(text: str) -> Listener:
    """``--listen``: ``unix:PATH``, ``https://HOST:PORT`` or ``http://127.0.0.1:PORT``
    (``domain.gateway_settings.parse_address``); ``InvalidRequest`` naming ``listen``."""
    return parse_address(text, FIELD)


def bind(listener: Listener) -> socket.socket:
    """The listening socket of ``listener``: a unix socket replaces a stale one (never a file
    that is not a socket) and is made 0666."""
    if listener.kind == "unix":
        assert listener.path is not None
        path = Path(listener.path)
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISSOCK(path.lstat().st_mode):
                raise InvalidRequest(field=FIELD, rule=f"{path} exists and is not a socket")
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(listener.path)
        # Anyone may connect: the kernel tells the gateway who did (SO_PEERCRED).
        path.chmod(0o666)
    else:
        assert listener.host is not None and listener.port is not None
        family = socket.AF_INET6 if ":" in listener.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((listener.host, listener.port))
    sock.listen(512)
    sock.set_inheritable(True)
    return sock


class _Settler:
    """The store settled now and every ``every_s`` in a thread of its own, until stopped."""

    def __init__(self, lifecycles: SiteVerbs, every_s: float) -> None:
        self._lifecycles = lifecycles
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="settle", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                settled = self._lifecycles.settle()
                if settled.published or settled.closed:
                    log.info("settled: published %s, closed %s", settled.published, settled.closed)
            except Exception as error:  # the next pass tries again; the gateway keeps serving
                log.warning("settling the store failed: %s", error)
            self._stop.wait(self._every_s)


def require_tls_files(
    listeners: Sequence[Listener], tls_cert: str | None, tls_key: str | None
) -> None:
    """An https:// listener needs ``--tls-cert`` and ``--tls-key``."""
    if any(listener.tls for listener in listeners) and not (tls_cert and tls_key):
        raise InvalidRequest(
            field="tls_cert", rule="an https:// listener needs --tls-cert and --tls-key"
        )


def build_servers(
    app: FastAPI,
    listeners: Sequence[Listener],
    *,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    trusted_proxies: Sequence[str] = (),
    bound: Mapping[Listener, socket.socket] | None = None,
    accept_at_once: int | None = None,
    counted: Callable[[int], None] | None = None,
) -> list[tuple[QuietServer, list[socket.socket]]]:
    """The servers of ``listeners``, each with its bound sockets: the plain ones (unix, loopback
    HTTP) share one, the TLS ones another. ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are
    read only from ``trusted_proxies`` (``[gateway] trusted_proxies``), and from nobody when it
    is empty (uvicorn would take them from 127.0.0.1 by default). A request's head is buffered
    up to twice ``MAX_HEAD_BYTES``, so that one past that bound is answered with the product's
    error (``gateway.inputs``) however it arrives; past twice, the connection is closed.
    ``bound``: each listener's socket, bound already (by default each is bound here);
    ``accept_at_once``: the connections taken at most each time a listener is ready (by
    default uvicorn's backlog, 2,048, which it also gives the kernel for a socket it listens
    on); ``counted``: told the number of open connections whenever it changes."""
    require_tls_files(listeners, tls_cert, tls_key)
    settings = app.state.gateway.settings
    limits = ConnectionLimits(
        total=settings.max_connections,
        per_peer=settings.max_connections_per_peer,
        header_timeout_s=settings.header_timeout_s,
        head_bytes=2 * MAX_HEAD_BYTES,
        counted=counted,
    )
    app.state.gateway.connections = limits
    protocol = guarded_protocol(limits)
    servers = []
    for tls in (False, True):
        chosen = [listener for listener in listeners if listener.tls is tls]
        if not chosen:
            continue
        config = uvicorn.Config(
            app,
            http=protocol,
            lifespan="off",
            log_level="warning",
            access_log=False,
            timeout_keep_alive=settings.idle_timeout_s,
            timeout_graceful_shutdown=settings.shutdown_timeout_s,
            ssl_certfile=tls_cert if tls else None,
            ssl_keyfile=tls_key if tls else None,
            proxy_headers=bool(trusted_proxies),
            forwarded_allow_ips=list(trusted_proxies) or None,
            backlog=accept_at_once or 2048,
        )
        sockets = [bind(listener) if bound is None else bound[listener] for listener in chosen]
        servers.append((QuietServer(config), sockets))
    return servers


def serve(
    app: FastAPI,
    lifecycles: SiteVerbs,
    listeners: Sequence[Listener],
    *,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    settle_every_s: float = SETTLE_EVERY_S,
) -> None:
    """Serve ``app`` on every listener until SIGINT or SIGTERM, settling the store meanwhile."""
    trusted = lifecycles.profile.gateway_settings.trusted_proxies
    servers = build_servers(
        app, listeners, tls_cert=tls_cert, tls_key=tls_key, trusted_proxies=trusted
    )
    settler = _Settler(lifecycles, settle_every_s)
    settler.start()
    for listener in listeners:
        log.warning("slurm-image gateway listening on %s", listener.describe())
    try:
        run_servers(servers, on_stop=app.state.gateway.answers.stop)
    finally:
        settler.stop()
        for listener in listeners:
            if listener.kind == "unix" and listener.path is not None:
                with contextlib.suppress(OSError):
                    Path(listener.path).unlink()


class QuietServer(uvicorn.Server):
    """uvicorn's server, leaving the signals to ``_serve_all`` (several share one loop)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def run_servers(
    servers: list[tuple[QuietServer, list[socket.socket]]], on_stop: Callable[[], None]
) -> None:
    """Serve ``servers`` on one event loop until SIGINT or SIGTERM. asyncio's own loop, not
    uvloop: libuv makes a listening socket's backlog the number a server is given, and accepts
    every waiting connection at once, where ``accept_at_once`` must bound only the accepting.

    What was made before serving (the modules, the application, its routes) lives as long as
    the process: frozen out of the garbage collector, whose full passes would otherwise walk it
    all again every second or so under load, pausing every request in flight."""
    gc.freeze()
    asyncio.run(_serve_all(servers, on_stop))


async def _serve_all(
    servers: list[tuple[QuietServer, list[socket.socket]]], on_stop: Callable[[], None]
) -> None:
    """Serve until SIGINT or SIGTERM; then ``on_stop`` ends the long answers, and each server
    drains what is left within its ``timeout_graceful_shutdown``."""
    loop = asyncio.get_running_loop()

    def stop() -> None:
        on_stop()
        for server, _ in servers:
            server.should_exit = True

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop)
    from anyio import to_thread

    to_thread.current_default_thread_limiter().total_tokens = 256
    await asyncio.gather(*(server.serve(sockets=sockets) for server, sockets in servers))
