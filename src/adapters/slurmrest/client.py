"""HTTP to slurmrestd: over TCP with JWT headers, or over a unix socket with local auth.

The token is read from a file or an environment variable when a request is made, kept only in
the request headers, and never appears in a repr, a log record or an error.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from slurm_image.adapters.deadline import Watchdog
from slurm_image.adapters.slurm_fields import bounded
from slurm_image.domain import paths
from slurm_image.ports.submitter import SchedulerAuthError
from slurm_image.submitters import TransientFailure

_log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024 * 1024
MAX_TOKEN_BYTES = 64 * 1024


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any] | None
    text: str


class TokenSource:
    """Where the JWT comes from: a file or an environment variable (never the value itself)."""

    def __init__(self, *, token_file: str | None = None, token_env: str | None = None) -> None:
        if (token_file is None) == (token_env is None):
            raise ValueError("give exactly one of token_file and token_env")
        self._file = None if token_file is None else Path(token_file).expanduser()
        self._env = token_env

    def __repr__(self) -> str:
        where = f"file {self._file}" if self._file is not None else f"env {self._env}"
        return f"TokenSource({where})"

    def read(self) -> str:
        if self._file is not None:
            token = _read_token_file(self._file)
        else:
            token = os.environ.get(self._env or "", "").strip()
        if token.startswith("SLURM_JWT="):
            token = token.removeprefix("SLURM_JWT=")
        # A header value must be ASCII: anything else would fail inside httpx, outside the
        # submitter's error contract. A JWT is base64url and dots.
        if (
            not token
            or not token.isascii()
            or any(c.isspace() or not c.isprintable() for c in token)
        ):
            where = f"token file {self._file}" if self._file else f"variable {self._env}"
            raise SchedulerAuthError(field="token", rule=f"no usable token in the {where}")
        return token


def _read_token_file(path: Path) -> str:
    """The token file's text, through one descriptor that never blocks on a FIFO, bounded."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SchedulerAuthError(
            field="token_file", rule=f"cannot read the token file {path}: {exc.strerror}"
        ) from None
    try:
        status = os.fstat(fd)
        problem = paths.secret_file_problem(status.st_mode, status.st_uid, os.geteuid())
        if problem is not None:
            raise SchedulerAuthError(field="token_file", rule=f"the token file {path} {problem}")
        data = os.read(fd, MAX_TOKEN_BYTES + 1)
    except OSError as exc:
        raise SchedulerAuthError(
            field="token_file", rule=f"cannot read the token file {path}: {exc.strerror}"
        ) from None
    finally:
        os.close(fd)
    if len(data) > MAX_TOKEN_BYTES:
        raise SchedulerAuthError(
            field="token", rule=f"the token file {path} is too large for a token"
        )
    return data.decode("ascii", "replace").strip()


class RestClient:
    """One slurmrestd endpoint. ``url`` is ``http://host:port`` or ``unix:///path.sock``.
    ``timeout_s`` bounds each exchange whole (connecting, sending, every read of the answer):
    a slurmrestd that answers a byte at a time holds a call no longer than one that does not
    answer at all."""

    def __init__(
        self,
        url: str,
        *,
        user: str | None = None,
        token: TokenSource | None = None,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        parts = urlsplit(url)
        self.url = url
        if parts.scheme == "unix":
            if not parts.path.startswith("/"):
                raise ValueError("a unix socket URL needs an absolute path: unix:///path.sock")
            self._base = "http://slurmrestd"
            socket_path = parts.path
            self._transport: Callable[[], httpx.BaseTransport] = lambda: (
                transport or httpx.HTTPTransport(uds=socket_path)
            )
            self._user, self._token = None, None  # local auth: the socket peer's uid
        elif parts.scheme in ("http", "https"):
            if user is None or token is None:
                raise ValueError("slurmrestd over TCP needs a user and a token source")
            self._base = url.rstrip("/")
            self._transport = lambda: transport or httpx.HTTPTransport()
            self._user, self._token = user, token
        else:
            raise ValueError(f"unsupported slurmrestd URL scheme {parts.scheme!r}")
        self._timeout_s = timeout_s
        self._timeout = httpx.Timeout(timeout_s)

    def __repr__(self) -> str:
        return f"RestClient({self.url!r}, user={self._user!r})"

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._token is not None and self._user is not None:
            headers["X-SLURM-USER-NAME"] = self._user
            headers["X-SLURM-USER-TOKEN"] = self._token.read()
        return headers

    def request(
        self, method: str, path: str, payload: dict[str, Any] | None = None, *, sent: bool
    ) -> Answer:
        """One HTTP exchange. Transport trouble becomes ``TransientFailure``.

        ``sent`` says whether a lost answer leaves the outcome unknown (a submit or a cancel).
        """
        headers = self._headers()
        content = None
        if payload is not None:
            headers["Content-Type"] = "application/json"
            content = json.dumps(payload).encode("utf-8")
        watchdog = Watchdog(self._timeout_s)
        try:
            # A transport of its own per exchange: closing the client closes its transport,
            # which would cut short the exchanges of other threads sharing one.
            with httpx.Client(
                base_url=self._base, transport=self._transport(), timeout=self._timeout
            ) as client:
                response = client.request(
                    method,
                    path,
                    headers=headers,
                    content=content,
                    extensions={"trace": watchdog.trace},
                )
                raw = response.read()
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise TransientFailure(
                f"{method} {path}: cannot connect to slurmrestd: {_describe(exc)}",
                "slurmrestd",
                ambiguous=False,
            ) from None
        except httpx.TransportError as exc:
            why = (
                f"did not answer within {self._timeout_s:g}s"
                if watchdog.expired
                else f"did not answer: {_describe(exc)}"
            )
            raise TransientFailure(
                f"{method} {path}: slurmrestd {why}",
                "slurmrestd",
                ambiguous=sent,
            ) from None
        finally:
            watchdog.cancel()
        text = raw[:MAX_BODY].decode("utf-8", "replace")
        body = None
        try:
            parsed = json.loads(text) if text.strip() else None
            body = parsed if isinstance(parsed, dict) else None
        except ValueError:
            body = None
        _log.debug("%s %s -> %d", method, path, response.status_code)
        return Answer(response.status_code, body, bounded(text, 500))


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {bounded(str(exc), 200)}" if str(exc) else type(exc).__name__
