"""``resolve`` against real registries, checked against ``skopeo inspect --raw`` of the same
registry: the open local registry (plain HTTP, anonymous, with the profile's
ENROOT_ALLOW_HTTP), the htpasswd one (Basic over TLS) of scripts/local-registry, and a real
``docker-registry`` with ``auth: token`` and the tests' own token service (Bearer, its realm on
another loopback address). The two-architecture ``multi`` index pins as skopeo's bytes hash,
and each architecture's manifest is the one the index names for it.

Needs scripts/local-registry up and scripts/test-images; skopeo; docker-registry.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "execution"))

# the execution suite's fixtures of the registries, registered here by import
from harness import AuthRegistry, auth_registry, registry_images  # noqa: F401

from multiarch import multi_image
from resolve_site import ResolveSite
from support import unavailable
from tls_material import TlsMaterial, make_tls_material
from token_registry import TokenRegistry, skopeo_copy, skopeo_raw, token_registry

pytestmark = pytest.mark.e2e


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def need_skopeo() -> None:
    if shutil.which("skopeo") is None:
        unavailable("skopeo missing (apt-get install skopeo)")


def platform_digest(index: bytes, architecture: str) -> str:
    for entry in json.loads(index)["manifests"]:
        if entry["platform"]["architecture"] == architecture:
            return str(entry["digest"])
    raise AssertionError(f"no {architecture} in the index")


def images(request: pytest.FixtureRequest) -> dict[str, str]:
    found: dict[str, str] = request.getfixturevalue("registry_images")
    return found


def test_a_two_architecture_tag_pins_its_index_and_names_each_manifest_as_skopeo_sees_it(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    need_skopeo()
    multi = multi_image(images(request))
    tag = multi.index.split("@", 1)[0]
    raw = skopeo_raw(tag, work=tmp_path)
    site = ResolveSite(tmp_path / "site", allow_http=True)

    done = site.run("resolve", tag)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"{tag}@{sha256(raw)}"
    assert sha256(raw) == multi.index_digest

    arm64 = site.json("resolve", tag, "--arch", "aarch64")
    assert arm64["digest"] == sha256(raw)
    assert arm64["manifest"] == platform_digest(raw, "arm64") == multi.digest("aarch64")
    amd64 = site.json("resolve", tag, "--arch", "x86_64")
    assert amd64["manifest"] == platform_digest(raw, "amd64") == multi.digest("x86_64")
    platforms = {
        (m["platform"]["architecture"], m["platform"]["variant"]) for m in arm64["manifests"]
    }
    assert platforms == {("amd64", None), ("arm64", "v8")}


def test_a_plain_http_registry_is_not_asked_unless_the_profile_allows_it(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tag = images(request)["client"].split("@", 1)[0]
    refused = ResolveSite(tmp_path).run("resolve", tag)
    assert refused.returncode == 3, refused.stderr
    assert "ENROOT_ALLOW_HTTP" in refused.stderr


def test_a_basic_registry_answers_the_netrc_entry_and_refuses_a_wrong_one(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    need_skopeo()
    basic: AuthRegistry = request.getfixturevalue("auth_registry")
    tag = basic.images["client"].split("@", 1)[0]
    creds = f"{basic.user}:{basic.password}"
    raw = skopeo_raw(tag, ca_file=basic.ca_file, creds=creds, work=tmp_path)
    netrc = f"machine {basic.host} login {basic.user} password "
    site = ResolveSite(
        tmp_path / "good", netrc=netrc + basic.password + "\n",
        ca_file=basic.ca_file,
    )  # fmt: skip
    assert site.json("resolve", tag)["digest"] == sha256(raw)

    wrong = "wrong-canary-9e8d7c"
    refused = ResolveSite(
        tmp_path / "wrong", netrc=netrc + wrong + "\n", ca_file=basic.ca_file
    ).run("resolve", tag)
    assert refused.returncode == 3
    assert len(refused.stderr.strip().splitlines()) == 1
    assert basic.address in refused.stderr
    assert f"machine {basic.host} login {basic.user}" in refused.stderr
    assert wrong not in refused.stderr + refused.stdout

    anonymous = ResolveSite(tmp_path / "none", ca_file=basic.ca_file).run("resolve", tag)
    assert anonymous.returncode == 3
    assert "credentials_file" in anonymous.stderr


@pytest.fixture(scope="module")
def token_tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("token-tls"))


@pytest.fixture(scope="module")
def bearer_registry(
    tmp_path_factory: pytest.TempPathFactory,
    token_tls: TlsMaterial,
    request: pytest.FixtureRequest,
) -> Iterator[TokenRegistry]:
    need_skopeo()
    client = images(request)["client"]
    work = tmp_path_factory.mktemp("token-registry")
    with token_registry(work / "registry", token_tls, public={"public/client"}) as registry:
        name, _, digest = client.partition("@")
        repository = name.rsplit(":", 1)[0]
        for target in ("private/client:1", "public/client:1"):
            skopeo_copy(
                f"{repository}@{digest}",
                f"{registry.address}/{target}",
                ca_file=token_tls.ca_file,
                work=work,
                creds=f"{registry.user}:{registry.password}",
            )
        yield registry


def test_a_bearer_registry_answers_through_its_token_realm_with_and_without_a_login(
    tmp_path: Path, bearer_registry: TokenRegistry
) -> None:
    registry = bearer_registry
    creds = f"{registry.user}:{registry.password}"
    private = f"{registry.address}/private/client:1"
    raw = skopeo_raw(private, ca_file=registry.ca_file, creds=creds, work=tmp_path)
    host = registry.address.rsplit(":", 1)[0]
    netrc = f"machine {host} login {registry.user} password {registry.password}\n"
    site = ResolveSite(tmp_path / "login", netrc=netrc, ca_file=registry.ca_file)
    before = len(registry.service.seen)
    assert site.json("resolve", private)["digest"] == sha256(raw)
    asked = registry.service.seen[before:]
    assert asked and all(seen.authorization for seen in asked)  # the realm got the login

    anonymous = ResolveSite(tmp_path / "anonymous", ca_file=registry.ca_file)
    public = f"{registry.address}/public/client:1"
    assert anonymous.json("resolve", public)["digest"] == sha256(raw)  # the same image
    refused = anonymous.run("resolve", private)
    assert refused.returncode == 3, refused.stderr
    assert "credentials" in refused.stderr


def test_a_bearer_realm_refusing_the_login_names_the_entry_never_the_password(
    tmp_path: Path, bearer_registry: TokenRegistry
) -> None:
    registry = bearer_registry
    host = registry.address.rsplit(":", 1)[0]
    wrong = "wrong-canary-4f5e6d"
    site = ResolveSite(
        tmp_path, netrc=f"machine {host} login {registry.user} password {wrong}\n",
        ca_file=registry.ca_file,
    )  # fmt: skip
    refused = site.run("resolve", f"{registry.address}/private/client:1")
    assert refused.returncode == 3
    assert f"machine {host} login {registry.user}" in refused.stderr
    assert "127.0.0.2" in refused.stderr  # the realm that refused it
    assert wrong not in refused.stderr + refused.stdout
