"""A registry that lies, for tests: a stdlib HTTP server on 127.0.0.1 in front of the local
registry of scripts/local-registry (plain HTTP), forwarding every request except the answers a
test scripts. It can also serve images of its own (manifests and blobs it was given, by their
true digests) whose other blobs come from upstream. Blobs are looked up in every repository
named, so a manifest of one test image can be served under another's name.

Bounded: it serves at most ``max_requests`` requests and stops itself after ``lifetime`` seconds.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.client
import io
import json
import secrets
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

V2S2 = "application/vnd.docker.distribution.manifest.v2+json"
LIST_V2 = "application/vnd.docker.distribution.manifest.list.v2+json"
MANIFEST_ACCEPT = f"{V2S2}, application/vnd.oci.image.manifest.v1+json"
CLIENT = "slurm-image-test/client"
NOPYTHON = "slurm-image-test/nopython"
TEST_REPOSITORIES = (CLIENT, NOPYTHON, "slurm-image-test/serving")


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Answer:
    """What to answer for GETs of ``path`` (and HEADs, headers only); ``accept``: only when the
    request's Accept header holds this text; ``content_digest``: the Docker-Content-Digest of
    a 200 answer (None: the body's own)."""

    path: str
    body: bytes
    status: int = 200
    media_type: str = V2S2
    accept: str | None = None
    content_digest: str | None = None


class LyingRegistry:
    def __init__(
        self,
        upstream: str = "127.0.0.1:5000",
        repositories: tuple[str, ...] = TEST_REPOSITORIES,
        lifetime: float = 600,
        max_requests: int = 5000,
        login: tuple[str, str] | None = None,
        bearer: bool = False,
    ) -> None:
        """``login``: the (user, password) every request must carry, as Basic, or with
        ``bearer`` as a token its realm (``/token``, no scope in the challenge) gives that login."""
        self.upstream = upstream
        self.login = login
        self.bearer = bearer
        self.token = secrets.token_urlsafe(24)
        self.repositories = repositories
        self.answers: list[Answer] = []
        self.requests: list[tuple[str, str, str]] = []  # method, path, Accept
        self._left = max_requests
        self._lock = threading.Lock()
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                registry._handle(self, body=True)

            def do_HEAD(self) -> None:
                registry._handle(self, body=False)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        self._closed = False

    # -- what a test scripts ---------------------------------------------------------------

    def answer(self, answer: Answer) -> None:
        self.answers.insert(0, answer)  # the latest rule wins

    def add_manifest(self, repository: str, data: bytes, media_type: str = V2S2) -> str:
        """Serve ``data`` honestly as ``manifests/<its digest>``; returns the digest."""
        digest = digest_of(data)
        self.answers.append(Answer(f"/v2/{repository}/manifests/{digest}", data, 200, media_type))
        return digest

    def add_blob(self, repository: str, data: bytes) -> str:
        digest = digest_of(data)
        self.answers.append(
            Answer(f"/v2/{repository}/blobs/{digest}", data, 200, "application/octet-stream")
        )
        return digest

    # -- upstream ------------------------------------------------------------------------------

    def fetch(self, path: str, accept: str | None = None) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(self.upstream, timeout=60)
        try:
            connection.request("GET", path, headers={"Accept": accept} if accept else {})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def manifest(self, repository: str, digest: str) -> bytes:
        status, _, data = self.fetch(f"/v2/{repository}/manifests/{digest}", MANIFEST_ACCEPT)
        assert status == 200, (repository, digest, status)
        return data

    def config(self, repository: str, digest: str) -> dict[str, Any]:
        manifest = json.loads(self.manifest(repository, digest))
        status, _, data = self.fetch(f"/v2/{repository}/blobs/{manifest['config']['digest']}")
        assert status == 200, status
        config: dict[str, Any] = json.loads(data)
        return config

    # -- serving --------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        accept = handler.headers.get("Accept", "")
        with self._lock:
            self.requests.append((handler.command, handler.path, accept))
            self._left -= 1
            exhausted = self._left < 0
        if exhausted:
            self._send(handler, 503, {}, b"request budget exhausted\n", body)
            return
        if self.login is not None and not self._allowed(handler, body):
            return
        for rule in self.answers:
            if rule.path == handler.path and (rule.accept is None or rule.accept in accept):
                headers = {"Content-Type": rule.media_type}
                if rule.status == 200:
                    headers["Docker-Content-Digest"] = rule.content_digest or digest_of(rule.body)
                self._send(handler, rule.status, headers, rule.body, body)
                return
        candidates = [handler.path]
        parts = handler.path.split("/blobs/", 1)
        if len(parts) == 2:
            candidates += [f"/v2/{name}/blobs/{parts[1]}" for name in self.repositories]
        for path in candidates:
            status, headers, data = self.fetch(path, accept or None)
            if status != 404:
                break
        kept = {
            key: value
            for key, value in headers.items()
            if key.lower() in ("content-type", "docker-content-digest", "www-authenticate")
        }
        self._send(handler, status, kept, data, body)

    def _allowed(self, handler: BaseHTTPRequestHandler, body: bool) -> bool:
        """Whether the request carries the login (or its token); else answered here."""
        assert self.login is not None
        basic = "Basic " + base64.b64encode(":".join(self.login).encode()).decode()
        given = handler.headers.get("Authorization")
        if self.bearer and handler.path.startswith("/token?"):
            if given != basic:
                self._send(handler, 401, {}, b'{"errors": [{"code": "UNAUTHORIZED"}]}', body)
            else:
                self._send(handler, 200, {}, json.dumps({"token": self.token}).encode(), body)
            return False
        if given == (f"Bearer {self.token}" if self.bearer else basic):
            return True
        challenge = (
            f'Bearer realm="http://{self.address}/token",service="lying"'
            if self.bearer
            else 'Basic realm="lying"'
        )
        self._send(handler, 401, {"WWW-Authenticate": challenge}, b"{}", body)
        return False

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler,
        status: int,
        headers: dict[str, str],
        data: bytes,
        body: bool,
    ) -> None:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if body:
            handler.wfile.write(data)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._timer.cancel()
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def lying_registry(**kwargs: Any) -> Iterator[LyingRegistry]:
    registry = LyingRegistry(**kwargs)
    try:
        yield registry
    finally:
        registry.close()


def pinned(registry_images: dict[str, str], name: str) -> str:
    """The digest a test image of the local registry is pinned by (scripts/test-images)."""
    return registry_images[name].rsplit("@", 1)[1]


def index_of(manifests: list[tuple[str, bytes]]) -> bytes:
    """A Docker manifest list naming each (architecture, manifest bytes) for linux."""
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": LIST_V2,
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


def with_config(manifest: bytes, config: bytes) -> bytes:
    """``manifest`` naming ``config`` instead of its own config blob."""
    document = json.loads(manifest)
    document["config"] = {**document["config"], "digest": digest_of(config), "size": len(config)}
    return json.dumps(document, indent=3).encode()


def top_layer(name: str) -> bytes:
    """A small gzipped layer holding one file."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        data = f"the top layer of {name}\n".encode()
        member = tarfile.TarInfo(f"etc/{name}")
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def derived_image(
    registry: LyingRegistry, repository: str, pin: str, name: str
) -> tuple[str, str, str]:
    """Served by ``registry``: the image ``pin`` of ``repository`` with one new top layer and a
    config of its own: (its manifest digest, the new layer's digest, the new config's)."""
    manifest = json.loads(registry.manifest(repository, pin))
    config = registry.config(repository, pin)
    config.setdefault("config", {})["Labels"] = {"derived": name}
    config_bytes = json.dumps(config).encode()
    layer = top_layer(name)
    layer_digest = registry.add_blob(repository, layer)
    config_digest = registry.add_blob(repository, config_bytes)
    manifest["config"] = {**manifest["config"], "digest": config_digest, "size": len(config_bytes)}
    manifest["layers"].append(
        {
            "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
            "size": len(layer),
            "digest": layer_digest,
        }
    )
    digest = registry.add_manifest(repository, json.dumps(manifest, indent=3).encode())
    return digest, layer_digest, config_digest


def blob_gets(registry: LyingRegistry) -> list[str]:
    """The digests of the blobs ``registry`` was asked for (GET)."""
    return [
        path.rsplit("/", 1)[1]
        for method, path, _ in registry.requests
        if method == "GET" and "/blobs/" in path
    ]
