"""``slurm-image serve --workers N`` (docs/gateway.md, "Deployment"): the listeners are bound
once, by this process, and served by N worker processes forked from it, each with an
application of its own (its requesters' verbs, its limits, its MUNGE replay file); whichever
worker accepts a connection reads its SO_PEERCRED. One more process settles the store, as a
single gateway's thread does.

This process only watches: SIGTERM or SIGINT is passed on to every child, each worker drains as
one gateway would, and the sockets are closed (a unix socket removed) once all have exited. A
child that dies is replaced, unless it died within ``STEADY_AFTER_S`` of its start: then the
gateway stops, with that child's exit code (its error is in the log), as one process would.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from slurm_image.gateway.accept_share import OpenCounts, SharedListener
from slurm_image.gateway.serve import (
    SETTLE_EVERY_S,
    Listener,
    _Settler,
    bind,
    build_servers,
    require_tls_files,
    run_servers,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

    from slurm_image.gateway.site import SiteVerbs

log = logging.getLogger("slurm_image.gateway")

STEADY_AFTER_S = 5.0
ACCEPT_AT_ONCE = 1
"""Connections a worker takes each time a listener is ready: one, so that each is taken by the
rule of ``gateway.accept_share``."""
_STOPS = {signal.SIGINT, signal.SIGTERM}
_WATCHED = _STOPS | {signal.SIGCHLD}

Application = Callable[[int], "FastAPI"]
"""The application worker ``index`` serves (built in that worker, after the fork)."""


def replay_files(path: str, workers: int) -> list[str]:
    """The MUNGE replay file of each worker: ``path`` for the first, ``path.2`` and on for the
    others (each reads them all when it starts)."""
    return [path if index == 0 else f"{path}.{index + 1}" for index in range(workers)]


@dataclass
class _Child:
    role: str
    index: int
    started: float


def serve_workers(
    lifecycles: SiteVerbs,
    application: Application,
    listeners: Sequence[Listener],
    workers: int,
    *,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    settle_every_s: float = SETTLE_EVERY_S,
) -> None:
    """Serve every listener with ``workers`` processes until SIGINT or SIGTERM (see the module
    docstring); ``SystemExit`` with a child's code when one failed as it started."""
    trusted = lifecycles.profile.gateway_settings.trusted_proxies
    require_tls_files(listeners, tls_cert, tls_key)
    bound = {listener: bind(listener) for listener in listeners}
    counts = OpenCounts(workers)

    def worker(index: int) -> None:
        counts.publish(index, 0)  # a worker replacing a dead one starts with none
        app = application(index)
        shared = {
            listener: SharedListener(fileno=os.dup(sock.fileno()), counts=counts, index=index)
            for listener, sock in bound.items()
        }
        servers = build_servers(
            app,
            listeners,
            tls_cert=tls_cert,
            tls_key=tls_key,
            trusted_proxies=trusted,
            bound=shared,
            accept_at_once=ACCEPT_AT_ONCE,
            counted=lambda open_now: counts.publish(index, open_now),
        )
        run_servers(servers, on_stop=app.state.gateway.answers.stop)

    def settler(_: int) -> None:
        settling = _Settler(lifecycles, settle_every_s)
        settling.start()
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        signal.sigwait(_STOPS)
        settling.stop()

    for listener in listeners:
        log.warning(
            "slurm-image gateway listening on %s with %d workers", listener.describe(), workers
        )
    try:
        failed = _Supervisor({"worker": worker, "settler": settler}).run(workers)
    finally:
        for listener, sock in bound.items():
            sock.close()
            if listener.kind == "unix" and listener.path is not None:
                with contextlib.suppress(OSError):
                    Path(listener.path).unlink()
    if failed:
        raise SystemExit(failed)


class _Supervisor:
    """Forks the children, passes the stop signals on, and replaces a child that dies."""

    def __init__(self, roles: dict[str, Callable[[int], None]]) -> None:
        self._roles = roles
        self._children: dict[int, _Child] = {}
        self._stopping = False
        self._failed = 0

    def run(self, workers: int) -> int:
        """Until every child has exited; the exit code of a child that failed as it started,
        else 0."""
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
        try:
            for index in range(workers):
                self._start("worker", index)
            self._start("settler", 0)
            while self._children:
                received = signal.sigtimedwait(_WATCHED, 1.0)
                if received is not None and received.si_signo in _STOPS:
                    self._stop()
                self._reap()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        return self._failed

    def _start(self, role: str, index: int) -> None:
        pid = os.fork()
        if pid == 0:
            _run_child(self._roles[role], index)
        self._children[pid] = _Child(role, index, time.monotonic())

    def _stop(self) -> None:
        self._stopping = True
        for pid in self._children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def _reap(self) -> None:
        while self._children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self._children.clear()
                return
            if pid == 0:
                return
            child = self._children.pop(pid, None)
            if child is None or self._stopping:
                continue
            code = os.waitstatus_to_exitcode(status)
            if time.monotonic() - child.started < STEADY_AFTER_S:
                log.error(
                    "gateway %s %d exited %d as it started: stopping", child.role, child.index, code
                )
                self._failed = code if code > 0 else 1
                self._stop()
                continue
            log.warning(
                "gateway %s %d (pid %d) exited %d: starting another",
                child.role,
                child.index,
                pid,
                code,
            )
            self._start(child.role, child.index)


def _run_child(target: Callable[[int], None], index: int) -> None:
    """``target(index)`` in a forked child, which never returns into its parent's code."""
    from slurm_image.wire.errors import describe, exit_code_for

    code = 0
    try:
        for signum in _STOPS:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _WATCHED)
        target(index)
    except BaseException as error:
        log.error("gateway process %d: %s", os.getpid(), describe(error))
        code = exit_code_for(error)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
