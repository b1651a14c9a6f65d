"""Signatures by a real cosign (Debian forky's 3.1.1, scripts/cosign), in both its formats,
verified by the product against the local registries: the open one (plain HTTP, with the
profile's ENROOT_ALLOW_HTTP) and the htpasswd one, whose signature lookup needs the netrc's
credentials. With ``require_signature`` and the site's key, ``import --dry-run`` plans the
import with the key's fingerprint; the image re-signed with another key, an unsigned image and
a signature copied from another digest are refused (exit 10) with nothing in the workspace
(docs/design.md, "Image policy and signatures").

Needs root (chroot), the forky root (scripts/debian-roots forky), scripts/local-registry up
and scripts/test-images.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "execution"))

# the execution suite's fixtures of the registries, registered here by import
from harness import AuthRegistry, auth_registry, need, registry_images  # noqa: F401

from cosign_real import (
    OPEN,
    Cosign,
    Repository,
    copy_image,
    copy_manifest,
    make_cosign,
    make_repository,
    split,
)
from slurm_image.domain.signatures import load_public_key
from slurm_image.domain.store_layout import StoreLayout
from slurm_image.wire.exit_codes import EXIT_UNSIGNED
from support import run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture
def cosign() -> Iterator[Cosign]:
    made = make_cosign()
    yield made
    made.remove()


@pytest.fixture
def repository(registry_images: dict[str, str]) -> Repository:  # noqa: F811
    return make_repository(registry_images)


@dataclass
class Site:
    root: Path
    workspace: Path

    def profile(self, key: Path, netrc: Path | None = None) -> Path:
        text = (
            f'workspace_root = "{self.workspace}"\n\n[image_build]\npartition = "cpu"\n'
            'cpus_per_task = 1\nmemory = "1G"\ntime_limit = "0:10:00"\n\n'
            '[submitter]\nkind = "fake"\n\n'
            '[enroot]\nenvironment = { ENROOT_ALLOW_HTTP = "yes" }\n'
            + (f'credentials_file = "{netrc}"\n' if netrc else "")
            + f'\n[policy]\nrequire_signature = true\nkeys = ["{key}"]\n'
        )
        path = self.root / "site.toml"
        path.write_text(text)
        return path

    def dry_run(self, profile: Path, source: str, **env: str) -> subprocess.CompletedProcess[str]:
        return run_cli(
            "--profile",
            str(profile),
            "--json",
            "import",
            source,
            "--name",
            "app",
            "--role",
            "client",
            "--dry-run",
            cwd=self.root,
            env={"HOME": str(self.root), **env},
        )

    def imports(self, profile: Path, source: str) -> subprocess.CompletedProcess[str]:
        return run_cli(
            "--profile",
            str(profile),
            "import",
            source,
            "--name",
            "app",
            "--role",
            "client",
            cwd=self.root,
            env={"HOME": str(self.root)},
        )


@pytest.fixture
def site(tmp_path: Path) -> Site:
    """A site whose workspace root is made and still empty, as a new site's is."""
    workspace = tmp_path / "ws"
    workspace.mkdir(mode=0o755)
    return Site(tmp_path, workspace)


def fingerprint(key: Path) -> str:
    return load_public_key(key.read_bytes(), str(key)).fingerprint


@pytest.mark.parametrize("legacy", [False, True], ids=["bundle", "legacy"])
def test_an_image_signed_by_cosign_with_the_site_key_is_planned_with_its_fingerprint(
    cosign: Cosign, repository: Repository, site: Site, legacy: bool
) -> None:
    key = cosign.key_pair("site")
    source = repository.ref(repository.client)
    cosign.sign("site", source, legacy=legacy, extra=("--allow-http-registry",))
    done = site.dry_run(site.profile(key), source)
    assert done.returncode == 0, done.stderr
    signed_by = json.loads(done.stdout)["plan"]["signed_by"]
    assert signed_by["key_fingerprint"] == fingerprint(key)
    assert signed_by["format"] == ("cosign-legacy" if legacy else "sigstore-bundle")
    assert signed_by["signed_digest"] == repository.client
    assert json.loads(done.stdout)["plan"]["schema_version"] == 4


def assert_refused(
    done: subprocess.CompletedProcess[str], digest: str, words: str, site: Site, rule: str
) -> None:
    """Refused with one line, nothing staged, and the refusal the store's first history
    event (the workspace was new and empty)."""
    assert done.returncode == EXIT_UNSIGNED, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"slurm-image: error: {digest}: "), lines[0]
    assert words in lines[0]
    layout = StoreLayout(str(site.workspace))
    assert not Path(layout.jobs).exists() or not any(Path(layout.jobs).iterdir())
    assert not Path(layout.artifacts).exists() or not any(Path(layout.artifacts).iterdir())
    events = [
        json.loads(line)
        for month in sorted(Path(layout.history).glob("*.jsonl"))
        for line in month.read_text().splitlines()
    ]
    assert [(e["event"], e["rule"]) for e in events] == [("refused", rule)]


def test_the_image_signed_with_another_key_is_refused_before_anything_is_staged(
    cosign: Cosign, repository: Repository, site: Site
) -> None:
    key = cosign.key_pair("site")
    cosign.key_pair("other")
    source = repository.ref(repository.client)
    cosign.sign("other", source, legacy=False, extra=("--allow-http-registry",))
    cosign.sign("other", source, legacy=True, extra=("--allow-http-registry",))
    done = site.imports(site.profile(key), source)
    assert_refused(
        done, repository.client, "not signed by a policy key", site, "signature_other_key"
    )


def test_an_unsigned_image_is_refused_before_anything_is_staged(
    cosign: Cosign, repository: Repository, site: Site
) -> None:
    key = cosign.key_pair("site")
    done = site.imports(site.profile(key), repository.ref(repository.serving))
    assert_refused(done, repository.serving, "is not signed", site, "signature_missing")


@pytest.mark.parametrize("legacy", [False, True], ids=["bundle", "legacy"])
def test_a_signature_copied_from_another_digest_is_refused(
    cosign: Cosign, repository: Repository, site: Site, legacy: bool
) -> None:
    key = cosign.key_pair("site")
    cosign.sign(
        "site", repository.ref(repository.client), legacy=legacy, extra=("--allow-http-registry",)
    )
    suffix = ".sig" if legacy else ""
    with httpx.Client(timeout=30) as client:
        copy_manifest(
            client,
            f"http://{OPEN}",
            repository.name,
            "sha256-" + repository.client.removeprefix("sha256:") + suffix,
            "sha256-" + repository.serving.removeprefix("sha256:") + suffix,
        )
    done = site.imports(site.profile(key), repository.ref(repository.serving))
    words = "a replayed signature" if legacy else "signature of another digest"
    # a bundle answered for another digest is refused as malformed before any key is tried
    rule = "signature_replayed" if legacy else "signature_invalid"
    assert_refused(done, repository.serving, words, site, rule)


def test_the_htpasswd_registry_s_signature_lookup_uses_the_netrc_credentials(
    cosign: Cosign,
    auth_registry: AuthRegistry,  # noqa: F811
    site: Site,
) -> None:
    key = cosign.key_pair("site")
    reference = auth_registry.images["client"]
    name, digest = split(reference)
    source = f"{auth_registry.address}/{name}@{digest}"
    ca = cosign.workdir / cosign.name / "ca.crt"
    ca.write_bytes(auth_registry.ca_file.read_bytes())
    credentials = (
        "--registry-username",
        auth_registry.user,
        "--registry-password",
        auth_registry.password,
        "--registry-cacert",
        f"{cosign.name}/ca.crt",
    )
    cosign.sign("site", source, legacy=False, extra=credentials)
    netrc = site.root / "netrc"
    netrc.write_text(
        f"machine {auth_registry.host} login {auth_registry.user}"
        f" password {auth_registry.password}\n"
    )
    netrc.chmod(0o600)
    env = {"SSL_CERT_FILE": str(auth_registry.ca_file)}
    without = site.dry_run(site.profile(key), source, **env)
    assert without.returncode == 3, without.stderr
    assert auth_registry.password not in without.stderr
    done = site.dry_run(site.profile(key, netrc), source, **env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plan"]["signed_by"]["key_fingerprint"] == fingerprint(key)
    assert auth_registry.password not in done.stdout + done.stderr


def test_a_key_file_others_can_write_is_refused_naming_it(
    cosign: Cosign, repository: Repository, site: Site
) -> None:
    key = cosign.key_pair("site")
    exposed = site.root / "site.pub"
    exposed.write_bytes(key.read_bytes())
    exposed.chmod(0o666)
    done = site.dry_run(site.profile(exposed), repository.ref(repository.client))
    assert done.returncode == 2, done.stderr
    assert f"{exposed}: is writable by group or others" in done.stderr


@pytest.mark.parametrize("legacy", [False, True], ids=["bundle", "legacy"])
def test_an_rsa_key_imported_into_cosign_verifies_too(
    cosign: Cosign, repository: Repository, site: Site, legacy: bool
) -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=3072)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    key = cosign.imported_key_pair("rsa", pem)
    source = repository.ref(repository.client)
    cosign.sign("rsa", source, legacy=legacy, extra=("--allow-http-registry",))
    done = site.dry_run(site.profile(key), source)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plan"]["signed_by"]["key_fingerprint"] == fingerprint(key)


def test_an_index_pin_is_accepted_on_cosign_s_signature_of_the_architecture_s_manifest(
    cosign: Cosign,
    site: Site,
    registry_images: dict[str, str],  # noqa: F811
) -> None:
    need("multi" in registry_images, "no multi-architecture test image (scripts/test-images)")
    key = cosign.key_pair("site")
    source_repository, index = split(registry_images["multi"])
    _, amd64 = split(registry_images["multi@x86_64"])
    name = f"slurm-image-signatures/{uuid.uuid4().hex[:12]}"
    with httpx.Client(timeout=60) as client:
        copy_image(client, f"http://{OPEN}", source_repository, name, index)
    cosign.sign("site", f"{OPEN}/{name}@{amd64}", legacy=False, extra=("--allow-http-registry",))
    pin = f"{OPEN}/{name}@{index}"
    profile = site.profile(key)
    chosen = run_cli(
        "--profile", str(profile), "--json", "import", pin, "--name", "m", "--role", "client",
        "--arch", "x86_64", "--dry-run", cwd=site.root, env={"HOME": str(site.root)},
    )  # fmt: skip
    assert chosen.returncode == 0, chosen.stderr
    signed_by = json.loads(chosen.stdout)["plan"]["signed_by"]
    assert signed_by["signed_digest"] == amd64
    assert signed_by["key_fingerprint"] == fingerprint(key)
    unchosen = site.dry_run(profile, pin)  # no architecture: the index's own signature is needed
    assert unchosen.returncode == EXIT_UNSIGNED, unchosen.stderr
    other = run_cli(
        "--profile", str(profile), "import", pin, "--name", "m", "--role", "client",
        "--arch", "aarch64", "--dry-run", cwd=site.root, env={"HOME": str(site.root)},
    )  # fmt: skip
    assert other.returncode == EXIT_UNSIGNED, other.stderr
    assert "nor its aarch64 manifest" in other.stderr
