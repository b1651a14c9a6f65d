"""``ResolveTag`` and ``Outdated`` over the in-memory registry, credentials file and store: the
pin is the digest of the registry's bytes, the credentials are the profile's netrc entry for
that registry, plain HTTP only as the profile's ENROOT_ALLOW_HTTP allows, and a published tag
is reported current, moved, gone, unknown or failed."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from publish_support import PublishLab, chain_json
from scripted_registry import LIST_V2, V2S2, index_bytes, manifest_bytes
from slurm_image.adapters.memory import MemoryCredentialsFile, MemoryRegistry
from slurm_image.application.catalog import Catalog
from slurm_image.application.outdated import Outdated, TagState
from slurm_image.application.resolve import ResolveTag
from slurm_image.domain.errors import (
    InvalidReference,
    InvalidRegistryAnswer,
    NoImageForArchitecture,
)
from slurm_image.domain.profile import SiteProfile
from slurm_image.ports.registry import RegistryAuthFailed, RegistryUnavailable

REGISTRY = "registry.example.org"
REPOSITORY = "team/app"
TAG = f"{REGISTRY}/{REPOSITORY}:1"
AMD64, ARM64 = manifest_bytes("app", "amd64"), manifest_bytes("app", "arm64")
INDEX = index_bytes([("amd64", AMD64), ("arm64", ARM64)])
NETRC = "~/.config/enroot/.credentials"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture
def registry() -> MemoryRegistry:
    registry = MemoryRegistry()
    registry.host(REGISTRY)
    registry.put(REGISTRY, REPOSITORY, "1", INDEX, LIST_V2)
    return registry


def profile(profile_for: Any, **enroot: Any) -> SiteProfile:
    built, _ = profile_for("/site/ws", **({"enroot": enroot} if enroot else {}))
    return built  # type: ignore[no-any-return]


def resolver(
    registry: MemoryRegistry, netrc: bytes | None = None
) -> tuple[ResolveTag, MemoryCredentialsFile]:
    files = MemoryCredentialsFile()
    if netrc is not None:
        files.files["/home/user/.config/enroot/.credentials"] = (netrc, 0o600, True)
    return ResolveTag(registry, registry.clock, files), files


def test_a_tag_is_pinned_by_the_digest_of_the_registrys_bytes(
    registry: MemoryRegistry, profile_for: Any
) -> None:
    resolve, _ = resolver(registry)
    resolution = resolve(TAG, profile(profile_for), arch="aarch64")
    assert resolution.pinned == f"{TAG}@{sha256(INDEX)}"
    assert resolution.arch_manifest == sha256(ARM64)
    assert resolution.resolved_from.model_dump() == {
        "tag": TAG,
        "digest": sha256(INDEX),
        "resolved_at": "2024-01-01T00:00:00.000000Z",
    }
    assert resolution.as_dict()["manifests"][1]["platform"] == {
        "os": "linux",
        "architecture": "arm64",
        "variant": None,
    }


def test_docker_hub_short_names_are_asked_of_registry_1_with_library(
    registry: MemoryRegistry, profile_for: Any
) -> None:
    registry.host("registry-1.docker.io")
    registry.put("registry-1.docker.io", "library/ubuntu", "24.04", AMD64, V2S2)
    resolve, _ = resolver(registry)
    assert resolve("ubuntu:24.04", profile(profile_for)).pinned == f"ubuntu:24.04@{sha256(AMD64)}"


@pytest.mark.parametrize(
    "text", [f"{TAG}@sha256:{'a' * 64}", f"{REGISTRY}/{REPOSITORY}", "Team/App:1"]
)
def test_a_reference_that_is_no_tag_reference_asks_no_registry(
    registry: MemoryRegistry, profile_for: Any, text: str
) -> None:
    resolve, _ = resolver(registry)
    registry.hosts.clear()  # any request would now fail as unreachable
    with pytest.raises(InvalidReference):
        resolve(text, profile(profile_for))


def test_an_architecture_the_index_lacks_is_refused_naming_what_it_holds(
    registry: MemoryRegistry, profile_for: Any
) -> None:
    resolve, _ = resolver(registry)
    with pytest.raises(NoImageForArchitecture) as caught:
        resolve(TAG, profile(profile_for), arch="ppc64le")
    assert "linux/amd64, linux/arm64" in caught.value.rule


def test_a_digest_header_that_lies_is_refused(registry: MemoryRegistry, profile_for: Any) -> None:
    registry.put(REGISTRY, REPOSITORY, "1", INDEX, LIST_V2, content_digest=sha256(b"other"))
    resolve, _ = resolver(registry)
    with pytest.raises(InvalidRegistryAnswer) as caught:
        resolve(TAG, profile(profile_for))
    assert caught.value.field == TAG
    assert caught.value.refusal == "registry_digest_mismatch"  # a lie, as the history names it


def test_the_profiles_netrc_entry_for_the_registry_is_the_one_sent(
    registry: MemoryRegistry, profile_for: Any
) -> None:
    host = registry.hosts[REGISTRY]
    host.auth, host.accounts = "basic", {"alice": "s3cret"}
    netrc = (
        b"machine other.example.org login bob password nope\n"
        b"machine registry.example.org login alice password s3cret\n"
    )
    resolve, _ = resolver(registry, netrc)
    resolve(TAG, profile(profile_for, credentials_file=NETRC))
    assert [(sent.where, sent.login) for sent in registry.sent] == [(REGISTRY, "alice")]


@pytest.mark.parametrize(
    ("settings", "netrc", "hint"),
    [
        ({}, None, "names no [enroot] credentials_file"),
        ({"credentials_file": NETRC}, b"machine other.org login a password b\n", "has no entry"),
        ({"credentials_file": NETRC}, b"machine registry.example.org login a password b\n",
         "that entry is in"),
    ],
)  # fmt: skip
def test_a_credentials_failure_says_where_the_credentials_come_from(
    registry: MemoryRegistry, profile_for: Any, settings: dict[str, str], netrc: bytes | None,
    hint: str,
) -> None:  # fmt: skip
    host = registry.hosts[REGISTRY]
    host.auth, host.accounts = "basic", {"alice": "s3cret"}
    resolve, _ = resolver(registry, netrc)
    with pytest.raises(RegistryAuthFailed) as caught:
        resolve(TAG, profile(profile_for, **settings))
    notes = " ".join(getattr(caught.value, "__notes__", []))
    assert hint in notes
    assert "s3cret" not in notes + str(caught.value)


def test_a_plain_http_registry_is_asked_only_when_the_profile_allows_http(
    registry: MemoryRegistry, profile_for: Any
) -> None:
    registry.hosts[REGISTRY].tls = False
    resolve, _ = resolver(registry)
    with pytest.raises(RegistryUnavailable):
        resolve(TAG, profile(profile_for))
    with pytest.raises(RegistryUnavailable):
        resolve(TAG, profile(profile_for, environment={"ENROOT_ALLOW_HTTP": "no"}))
    allowed = profile(profile_for, environment={"ENROOT_ALLOW_HTTP": "yes"})
    assert resolve(TAG, allowed).digest == sha256(INDEX)


# -- outdated ------------------------------------------------------------------------------


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


def publish_tagged(
    lab: PublishLab, resolve: ResolveTag, lifecycle_id: str, name: str, arch: str, tag: str = TAG
) -> None:
    resolution = resolve(tag, lab.profile, arch=arch)
    lab.finished(
        lifecycle_id,
        name=name,
        source=resolution.pinned,
        arch=arch,
        resolved_from=resolution.resolved_from,
        chain=chain_json(resolution.digest, resolution.arch_manifest),
    )
    lab.publish(lifecycle_id)


IDS = [f"img-{n:032x}" for n in range(1, 6)]


def states(found: list[Any]) -> dict[tuple[str, str | None], str]:
    return {(entry.name, entry.architecture): str(entry.state) for entry in found}


def test_outdated_reports_current_moved_gone_and_unknown(
    lab: PublishLab, registry: MemoryRegistry
) -> None:
    resolve, _ = resolver(registry)
    publish_tagged(lab, resolve, IDS[0], "app", "x86_64")
    publish_tagged(lab, resolve, IDS[1], "app", "aarch64")
    lab.finished(IDS[2], name="pinned")  # imported by digest: no tag
    lab.publish(IDS[2])
    outdated = Outdated(Catalog(lab.store), resolve, registry.clock)
    assert states(outdated(lab.profile)) == {
        ("app", "aarch64"): "current",
        ("app", "x86_64"): "current",
        ("pinned", "x86_64"): "unknown",
    }

    # the tag is pushed again: the amd64 image is new, the arm64 one the same
    new_amd64 = manifest_bytes("app v2", "amd64")
    new_index = index_bytes([("amd64", new_amd64), ("arm64", ARM64)])
    registry.put(REGISTRY, REPOSITORY, "1", new_index, LIST_V2)
    found = {entry.architecture: entry for entry in outdated(lab.profile, ["app"])}
    assert found["x86_64"].state is TagState.MOVED
    assert found["x86_64"].new_pin == f"{TAG}@{sha256(new_index)}"
    assert found["x86_64"].manifest == sha256(new_amd64)
    assert found["x86_64"].pinned == f"{TAG}@{sha256(INDEX)}"
    assert found["aarch64"].state is TagState.CURRENT  # its own manifest did not move
    assert "names the same aarch64 manifest" in (found["aarch64"].reason or "")

    registry.put(REGISTRY, REPOSITORY, "1", index_bytes([("amd64", new_amd64)]), LIST_V2)
    assert states(outdated(lab.profile, ["app"]))[("app", "aarch64")] == "gone"
    del registry.hosts[REGISTRY].manifests[(REPOSITORY, "1")]
    assert set(states(outdated(lab.profile, ["app"])).values()) == {"gone"}


def test_outdated_asks_each_tag_once_and_reports_what_it_could_not_check(
    lab: PublishLab, registry: MemoryRegistry
) -> None:
    resolve, _ = resolver(registry)
    publish_tagged(lab, resolve, IDS[0], "one", "x86_64")
    publish_tagged(lab, resolve, IDS[1], "two", "x86_64")
    asked: list[str] = []
    original = registry.fetch_manifest

    def counting(request: Any) -> Any:
        asked.append(request.reference)
        return original(request)

    registry.fetch_manifest = counting  # type: ignore[method-assign]
    assert set(
        states(Outdated(Catalog(lab.store), resolve, registry.clock)(lab.profile)).values()
    ) == {"current"}
    assert asked == ["1"]

    registry.hosts.clear()
    found = Outdated(Catalog(lab.store), resolve, registry.clock)(lab.profile)
    assert {str(entry.state) for entry in found} == {"failed"}
    assert all(isinstance(entry.error, RegistryUnavailable) for entry in found)


def test_outdated_asks_every_tag_within_one_timeout_for_the_whole_command(
    lab: PublishLab, registry: MemoryRegistry
) -> None:
    resolve, _ = resolver(registry)
    names = ["one", "two", "three"]
    for n, name in enumerate(names, start=1):
        image = index_bytes([("amd64", manifest_bytes(name))])
        registry.put(REGISTRY, REPOSITORY, name, image, LIST_V2)
        publish_tagged(lab, resolve, IDS[n], name, "x86_64", tag=f"{REGISTRY}/{REPOSITORY}:{name}")
    outdated = Outdated(Catalog(lab.store), resolve, registry.clock)
    registry.hosts[REGISTRY].answer_s = 0.6  # each answer takes 0.6 s of the registry's clock

    assert set(states(outdated(lab.profile, names)).values()) == {"current"}  # 60 s in all
    found = {entry.name: entry for entry in outdated(lab.profile, names, timeout_s=1)}

    assert found["one"].state is TagState.CURRENT
    assert found["two"].state is TagState.FAILED
    assert "did not answer in time (within 0.4 s" in (found["two"].reason or "")
    assert found["three"].state is TagState.FAILED
    assert "was not asked: the 1 s the command may spend" in (found["three"].reason or "")
    assert isinstance(found["three"].error, RegistryUnavailable)
