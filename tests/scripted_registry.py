"""A registry the tests script, and its token service: stdlib HTTP(S) servers on a loopback
address, for the Registry port's contract suite and the hostile-registry tests.

``ScriptedRegistry`` serves ``/v2/<repository>/manifests/<reference>`` from what a test put
there, anonymously, with Basic auth or with Bearer tokens of a ``TokenService``, over TLS (the
certificates of ``tls_material``) or plain HTTP. A test can make it lie: a
``Docker-Content-Digest`` of other bytes, a redirect (to another loopback address, a "host"
of its own), an answer of any size sent chunked without a ``Content-Length``, transient failures
with a ``Retry-After``, an answer dribbled a byte at a time (headers or body) or sent late.
Every server records each request it got with the ``Authorization`` header it carried, so a
test can say which host saw which credentials.

Bounded: each server stops after ``lifetime`` seconds.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

V2S2 = "application/vnd.docker.distribution.manifest.v2+json"
LIST_V2 = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_bytes(label: str, architecture: str = "amd64") -> bytes:
    """A small, valid v2s2 manifest, distinct per ``label``."""
    config = digest_of(f"config of {label} for {architecture}".encode())
    layer = digest_of(f"layer of {label}".encode())
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": V2S2,
            "config": {
                "mediaType": "application/vnd.docker.container.image.v1+json",
                "size": 100,
                "digest": config,
            },
            "layers": [
                {
                    "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                    "size": 200,
                    "digest": layer,
                }
            ],
        },
        indent=3,
    ).encode()


def index_bytes(manifests: list[tuple[str, bytes]], media_type: str = LIST_V2) -> bytes:
    """An index (Docker manifest list by default) naming each (OCI architecture, manifest)."""
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": media_type,
            "manifests": [
                {
                    "mediaType": V2S2,
                    "size": len(data),
                    "digest": digest_of(data),
                    "platform": {"architecture": architecture, "os": "linux"},
                }
                for architecture, data in manifests
            ],
        },
        indent=3,
    ).encode()


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    authorization: str | None


class Server:
    """A threading HTTP(S) server on ``host``, answering through ``respond``."""

    def __init__(
        self,
        host: str,
        respond: Callable[[BaseHTTPRequestHandler], None],
        tls: ssl.SSLContext | None,
        lifetime: float,
    ) -> None:
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                with server._lock:
                    server.seen.append(Seen("GET", self.path, self.headers.get("Authorization")))
                try:
                    respond(self)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    self.close_connection = True

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer((host, 0), Handler)
        self.http.daemon_threads = True
        if tls is not None:
            self.http.socket = tls.wrap_socket(self.http.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self.address = f"{host}:{self.http.server_address[1]}"
        self._thread = threading.Thread(
            target=self.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self._timer = threading.Timer(lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        self._closed = False

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.address}"

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._timer.cancel()
        self.http.shutdown()
        self.http.server_close()


def send(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> None:
    handler.send_response(status)
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def send_chunked(handler: BaseHTTPRequestHandler, size: int, media_type: str) -> int:
    """``size`` bytes of a JSON-looking body, chunked, without a Content-Length; returns how
    many were written before the client stopped reading."""
    handler.send_response(200)
    handler.send_header("Content-Type", media_type)
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    chunk = b'{"schemaVersion": 2, "padding": "' + b"x" * 65000 + b'"}\n'
    sent = 0
    try:
        while sent < size:
            part = chunk[: size - sent]
            handler.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            handler.wfile.flush()
            sent += len(part)
        handler.wfile.write(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
        pass
    handler.close_connection = True
    return sent


@dataclass(frozen=True)
class Dribble:
    """Send ``part`` (``headers`` or ``body``) of an answer one byte every ``every`` seconds,
    ``count`` bytes of it, then the rest at once: no read ever waits long, the answer as a whole
    takes ``count * every`` seconds."""

    part: str = "headers"
    every: float = 0.25
    count: int = 40


def send_dribbled(
    handler: BaseHTTPRequestHandler,
    body: bytes,
    headers: dict[str, str],
    dribble: Dribble,
    stop: threading.Event,
) -> bool:
    """A 200 answer of ``body`` sent as ``dribble`` says; whether it was sent to its end (False:
    the client hung up first, or the server stopped)."""
    lines = ["HTTP/1.1 200 OK", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{key}: {value}" for key, value in headers.items()]
    lines.append("X-Dribble: " + "." * dribble.count)
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    whole = head + body
    start = head.index(b"X-Dribble: ") + 11 if dribble.part == "headers" else len(head)
    handler.close_connection = True
    try:
        handler.wfile.write(whole[:start])
        for position in range(start, start + dribble.count):
            handler.wfile.write(whole[position : position + 1])
            handler.wfile.flush()
            if stop.wait(dribble.every):
                return False
        handler.wfile.write(whole[start + dribble.count :])
        handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
        return False
    return True


@dataclass
class _Issued:
    login: str | None
    scope: str


class TokenService:
    """A token realm (``GET /token?service=...&scope=repository:NAME:pull``): a token for the
    accounts' logins (Basic), and anonymous ones for ``public`` repositories; ``lifetime`` is
    the ``expires_in`` it answers."""

    def __init__(
        self,
        host: str,
        tls: ssl.SSLContext | None,
        accounts: dict[str, str],
        public: set[str],
        *,
        service: str = "scripted-registry",
        lifetime: int = 300,
        server_lifetime: float = 300,
        dribble: Dribble | None = None,
    ) -> None:
        self.accounts = accounts
        self.public = public
        self.service = service
        self.lifetime = lifetime
        self.dribble = dribble
        self.finished: list[bool] = []
        """Per dribbled answer: whether it was sent to the end."""
        self.issued: dict[str, _Issued] = {}
        self.stopped = threading.Event()
        self.server = Server(host, self._respond, tls, server_lifetime)

    @property
    def realm(self) -> str:
        return f"{self.server.url}/token"

    @property
    def requests(self) -> list[Seen]:
        return [seen for seen in self.server.seen if seen.path.startswith("/token")]

    def _respond(self, handler: BaseHTTPRequestHandler) -> None:
        url = urllib.parse.urlsplit(handler.path)
        query = urllib.parse.parse_qs(url.query)
        scope = (query.get("scope") or [""])[0]
        if url.path != "/token" or query.get("service", [self.service])[0] != self.service:
            send(handler, 400, b'{"errors": [{"code": "UNSUPPORTED"}]}')
            return
        login = basic_login(handler.headers.get("Authorization"), self.accounts)
        if login is False:
            send(handler, 401, b'{"errors": [{"code": "UNAUTHORIZED"}]}')
            return
        repository = scope.split(":")[1] if scope.count(":") == 2 else ""
        if login is None and repository not in self.public:
            send(handler, 401, b'{"errors": [{"code": "UNAUTHORIZED"}]}')
            return
        token = secrets.token_urlsafe(24)
        self.issued[token] = _Issued(login if isinstance(login, str) else None, scope)
        body = json.dumps({"token": token, "expires_in": self.lifetime}).encode()
        if self.dribble is not None:
            headers = {"Content-Type": "application/json"}
            self.finished.append(send_dribbled(handler, body, headers, self.dribble, self.stopped))
            return
        send(handler, 200, body, {"Content-Type": "application/json"})

    def close(self) -> None:
        self.stopped.set()
        self.server.close()


def basic_login(header: str | None, accounts: dict[str, str]) -> str | bool | None:
    """The login of a good Basic header; None without one; False for a bad one."""
    if header is None:
        return None
    if not header.startswith("Basic "):
        return False
    try:
        login, _, password = base64.b64decode(header[6:]).decode().partition(":")
    except ValueError:
        return False
    return login if accounts.get(login) == password else False


@dataclass
class Scripted:
    """What the registry answers for one path instead of its manifest."""

    redirect: str | None = None
    content_digest: str | None = None
    chunked_size: int | None = None
    failures: list[tuple[int, str | None]] = field(default_factory=list)
    """(status, Retry-After) answered, in order, before the real answer."""
    stall_after: int | None = None
    """Send this many bytes of the manifest, then nothing more until the server stops."""
    denial: str | None = None
    """Answer 403 with this error message, ``{authorization}`` replaced by the Authorization
    header received (a registry that echoes it)."""
    dribble: Dribble | None = None
    """Send the manifest this slowly (``Dribble``)."""
    delay: float = 0.0
    """Wait this long before answering."""


class ScriptedRegistry:
    """See the module docstring. ``auth``: ``anonymous``, ``basic`` (``accounts``) or
    ``bearer`` (``tokens``, a ``TokenService``)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        tls: ssl.SSLContext | None = None,
        *,
        auth: str = "anonymous",
        accounts: dict[str, str] | None = None,
        tokens: TokenService | None = None,
        lifetime: float = 300,
    ) -> None:
        self.auth = auth
        self.accounts = accounts or {}
        self.tokens = tokens
        self.manifests: dict[str, tuple[bytes, str]] = {}
        self.scripted: dict[str, Scripted] = {}
        self.sent_bytes: dict[str, int] = {}
        self.finished: dict[str, bool] = {}
        """Per dribbled path: whether its last answer was sent to the end."""
        self.stopped = threading.Event()
        self.server = Server(host, self._respond, tls, lifetime)

    @property
    def address(self) -> str:
        return self.server.address

    @property
    def seen(self) -> list[Seen]:
        return self.server.seen

    def put(self, repository: str, reference: str, data: bytes, media_type: str = V2S2) -> str:
        """Serve ``data`` for ``reference`` and for its digest; returns the digest."""
        digest = digest_of(data)
        for name in (reference, digest):
            self.manifests[f"/v2/{repository}/manifests/{name}"] = (data, media_type)
        return digest

    def script(self, repository: str, reference: str, **behaviour: object) -> Scripted:
        scripted = Scripted(**behaviour)  # type: ignore[arg-type]
        self.scripted[f"/v2/{repository}/manifests/{reference}"] = scripted
        return scripted

    def _challenge(self, repository: str) -> str:
        if self.auth == "basic":
            return 'Basic realm="scripted-registry"'
        assert self.tokens is not None
        return (
            f'Bearer realm="{self.tokens.realm}",service="{self.tokens.service}",'
            f'scope="repository:{repository}:pull"'
        )

    def _allowed(self, handler: BaseHTTPRequestHandler, repository: str) -> bool:
        header = handler.headers.get("Authorization")
        if self.auth == "anonymous":
            return True
        if self.auth == "basic":
            return isinstance(basic_login(header, self.accounts), str)
        assert self.tokens is not None
        if header is None or not header.startswith("Bearer "):
            return False
        issued = self.tokens.issued.get(header[7:])
        return issued is not None and issued.scope == f"repository:{repository}:pull"

    def _respond(self, handler: BaseHTTPRequestHandler) -> None:
        path = urllib.parse.urlsplit(handler.path).path
        repository = path[4:].split("/manifests/", 1)[0] if "/manifests/" in path else ""
        if path == "/v2/" or path == "/v2":
            repository = ""
        if not self._allowed(handler, repository):
            send(
                handler,
                401,
                b'{"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}',
                {"WWW-Authenticate": self._challenge(repository)},
            )
            return
        scripted = self.scripted.get(path, Scripted())
        if scripted.denial is not None:
            echoed = scripted.denial.replace(
                "{authorization}", handler.headers.get("Authorization") or ""
            )
            body = json.dumps({"errors": [{"code": "DENIED", "message": echoed}]}).encode()
            send(handler, 403, body, {"Content-Type": "application/json"})
            return
        if scripted.failures:
            status, retry_after = scripted.failures.pop(0)
            send(handler, status, b"", {"Retry-After": retry_after} if retry_after else {})
            return
        if scripted.redirect is not None:
            send(handler, 307, b"", {"Location": scripted.redirect})
            return
        found = self.manifests.get(path)
        if scripted.chunked_size is not None:
            media_type = found[1] if found else V2S2
            self.sent_bytes[path] = send_chunked(handler, scripted.chunked_size, media_type)
            return
        if found is None:
            send(handler, 404, b'{"errors": [{"code": "MANIFEST_UNKNOWN"}]}')
            return
        data, media_type = found
        digest = scripted.content_digest or digest_of(data)
        if scripted.delay and self.stopped.wait(scripted.delay):
            return
        if scripted.dribble is not None:
            headers = {"Content-Type": media_type, "Docker-Content-Digest": digest}
            self.finished[path] = send_dribbled(
                handler, data, headers, scripted.dribble, self.stopped
            )
            return
        if scripted.stall_after is not None:
            handler.send_response(200)
            handler.send_header("Content-Type", media_type)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data[: scripted.stall_after])
            handler.wfile.flush()
            self.stopped.wait(120)
            handler.close_connection = True
            return
        send(handler, 200, data, {"Content-Type": media_type, "Docker-Content-Digest": digest})

    def close(self) -> None:
        self.stopped.set()
        self.server.close()


class Sink:
    """Another host: it answers every GET with ``answer`` (sent as ``encoding`` when given) and
    records what it was sent."""

    def __init__(
        self,
        host: str,
        tls: ssl.SSLContext | None,
        answer: tuple[int, bytes, str] = (404, b"", "text/plain"),
        lifetime: float = 300,
        encoding: str | None = None,
    ) -> None:
        self.answer = answer

        def respond(handler: BaseHTTPRequestHandler) -> None:
            status, body, media_type = self.answer
            headers = {"Content-Type": media_type}
            if status == 200:
                headers["Docker-Content-Digest"] = digest_of(body)
            if encoding is not None:
                headers["Content-Encoding"] = encoding
            send(handler, status, body, headers)

        self.server = Server(host, respond, tls, lifetime)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def seen(self) -> list[Seen]:
        return self.server.seen

    def close(self) -> None:
        self.server.close()


@contextmanager
def closing(*servers: ScriptedRegistry | TokenService | Sink) -> Iterator[None]:
    try:
        yield
    finally:
        for server in servers:
            server.close()
