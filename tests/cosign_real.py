"""A real cosign for the integration tests (scripts/cosign: Debian forky's 3.1.1 in the forky
root), and copies of the test images in a repository of the test's own in the open local
registry, for it to sign."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
from harness import need

COSIGN = Path(__file__).resolve().parents[1] / "scripts" / "cosign"
OPEN = "127.0.0.1:5000"
MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ]
)


@dataclass
class Cosign:
    """scripts/cosign, and a directory of this test inside the forky root."""

    workdir: Path
    name: str

    def run(self, *args: str) -> None:
        done = subprocess.run(
            [str(COSIGN), *args], capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stderr

    def remove(self) -> None:
        """Remove this test's directory (its unencrypted keys) from the root."""
        shutil.rmtree(self.workdir / self.name, ignore_errors=True)

    def key_pair(self, label: str) -> Path:
        self.run("generate-key-pair", "--output-key-prefix", f"{self.name}/{label}")
        public = self.workdir / self.name / f"{label}.pub"
        public.chmod(0o644)
        return public

    def imported_key_pair(self, label: str, private_pem: bytes) -> Path:
        """``cosign import-key-pair`` of an unencrypted PKCS#8 key (RSA, say): its .pub."""
        source = self.workdir / self.name / f"{label}.pem"
        source.write_bytes(private_pem)
        self.run(
            "import-key-pair",
            "--key",
            f"{self.name}/{label}.pem",
            "--output-key-prefix",
            f"{self.name}/{label}",
        )
        public = self.workdir / self.name / f"{label}.pub"
        public.chmod(0o644)
        return public

    def sign(
        self, label: str, reference: str, *, legacy: bool, extra: tuple[str, ...] = ()
    ) -> None:
        self.run(
            "sign",
            "--key",
            f"{self.name}/{label}.key",
            "--use-signing-config=false",
            "--tlog-upload=false",
            *(["--new-bundle-format=false"] if legacy else []),
            "--yes",
            *extra,
            reference,
        )


def make_cosign() -> Cosign:
    """scripts/cosign ready (installed once), with a fresh directory of the caller's."""
    need(os.geteuid() == 0, "scripts/cosign runs cosign in a chroot: needs root")
    done = subprocess.run(
        [str(COSIGN), "--workdir"], capture_output=True, text=True, timeout=600, check=False
    )
    need(done.returncode == 0, f"no cosign to sign with: {done.stderr.strip()}")
    name = uuid.uuid4().hex
    workdir = Path(done.stdout.strip())
    (workdir / name).mkdir()
    return Cosign(workdir, name)


def copy_image(client: httpx.Client, base: str, source: str, target: str, digest: str) -> None:
    """Copy ``source@digest`` to the repository ``target`` of the same registry (blobs mounted),
    keeping its digest."""
    answer = client.get(
        f"{base}/v2/{source}/manifests/{digest}", headers={"Accept": MANIFEST_TYPES}
    )
    answer.raise_for_status()
    body = answer.json()
    for child in body.get("manifests", []):
        copy_image(client, base, source, target, child["digest"])
    for blob in [body["config"], *body["layers"]] if "config" in body else []:
        mounted = client.post(
            f"{base}/v2/{target}/blobs/uploads/", params={"mount": blob["digest"], "from": source}
        )
        assert mounted.status_code == 201, mounted.text
    put = client.put(
        f"{base}/v2/{target}/manifests/{digest}",
        content=answer.content,
        headers={"Content-Type": answer.headers["content-type"]},
    )
    assert put.status_code == 201, put.text


def copy_manifest(
    client: httpx.Client, base: str, repository: str, source: str, target: str
) -> None:
    answer = client.get(
        f"{base}/v2/{repository}/manifests/{source}", headers={"Accept": MANIFEST_TYPES}
    )
    answer.raise_for_status()
    put = client.put(
        f"{base}/v2/{repository}/manifests/{target}",
        content=answer.content,
        headers={"Content-Type": answer.headers["content-type"]},
    )
    assert put.status_code == 201, put.text


@dataclass
class Repository:
    """Copies of the client and serving test images in a repository of this test."""

    registry: str
    name: str
    client: str
    serving: str

    def ref(self, digest: str) -> str:
        return f"{self.registry}/{self.name}@{digest}"


def split(reference: str) -> tuple[str, str]:
    name, _, digest = reference.partition("@")
    return name.split("/", 1)[1].rsplit(":", 1)[0], digest


def make_repository(registry_images: dict[str, str]) -> Repository:
    """Copies (same digests) of the client and serving test images in a new repository."""
    name = f"slurm-image-signatures/{uuid.uuid4().hex[:12]}"
    with httpx.Client(timeout=60) as client:
        digests = []
        for image in ("client", "serving"):
            source, digest = split(registry_images[image])
            copy_image(client, f"http://{OPEN}", source, name, digest)
            digests.append(digest)
    return Repository(OPEN, name, *digests)
