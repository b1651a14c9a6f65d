"""Enroot 3.x on the node: zstd layers are refused by 3.x, and the job's log says so."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from harness import HTTP, JobFactory, Standin

ZSTD_LAYER = "application/vnd.oci.image.layer.v1.tar+zstd"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class ZstdRegistry:
    """A plain-HTTP registry holding one v2s2 image whose only layer is zstd-compressed."""

    def __init__(self) -> None:
        self.config = json.dumps({"architecture": "amd64", "os": "linux", "config": {}}).encode()
        self.layer = b"\x28\xb5\x2f\xfd" + b"\0" * 60  # zstd magic; never unpacked by 3.x
        self.manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "config": {
                    "mediaType": "application/vnd.docker.container.image.v1+json",
                    "size": len(self.config),
                    "digest": _digest(self.config),
                },
                "layers": [
                    {
                        "mediaType": ZSTD_LAYER,
                        "size": len(self.layer),
                        "digest": _digest(self.layer),
                    }
                ],
            }
        ).encode()
        self.digest = _digest(self.manifest)
        self.requests: list[str] = []
        blobs = {_digest(self.config): self.config, _digest(self.layer): self.layer}
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, body: bool) -> None:
                registry.requests.append(self.path)
                data = None
                if self.path == f"/v2/team/zstd/manifests/{registry.digest}":
                    data = registry.manifest
                elif self.path.startswith("/v2/team/zstd/blobs/"):
                    data = blobs.get(self.path.rsplit("/", 1)[1])
                if data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def source(self) -> str:
        return f"{self.address}/team/zstd:1@{self.digest}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def zstd_registry() -> Iterator[ZstdRegistry]:
    registry = ZstdRegistry()
    yield registry
    registry.close()


@pytest.mark.parametrize("version", ["3.4.1", "3.5.0"])
def test_zstd_layers_under_enroot_3_fail_with_a_line_that_says_so(
    make_job: JobFactory, standin: Standin, zstd_registry: ZstdRegistry, version: str
) -> None:
    standin.configure(version=version)
    job = make_job(
        operation="import_oci", role="client", source=zstd_registry.source, environment=HTTP
    )

    result = job.run()

    assert result.returncode == 1, result.stderr
    # the 3.x form reached the registry: the manifest was fetched by its digest
    assert f"/v2/team/zstd/manifests/{zstd_registry.digest}" in zstd_registry.requests
    assert f"Enroot {version} cannot import (zstd layers need Enroot 4.0.0 or newer)" in (
        result.stderr
    )
    assert "zstd-compressed layers" in result.stderr
    assert not Path(job.paths.partial).exists()
    assert not Path(job.paths.candidate).exists()
    assert standin.commands() == ["version", "import"]
    assert job.leftover_scratch() == []


def test_a_3_x_failure_without_zstd_does_not_blame_zstd(
    make_job: JobFactory, standin: Standin, zstd_registry: ZstdRegistry
) -> None:
    standin.configure(version="3.5.0")
    source = zstd_registry.source.replace("team/zstd", "team/missing")
    job = make_job(operation="import_oci", role="client", source=source, environment=HTTP)

    result = job.run()

    assert result.returncode == 22, result.stderr  # curl: the registry answered 404
    assert "zstd" not in result.stderr
    assert f"enroot import from {zstd_registry.address} failed with status 22" in result.stderr
