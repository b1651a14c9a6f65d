"""``resolve`` against registries that lie or misdirect, served here on loopback addresses
(127.0.0.1 is the registry, 127.0.0.2 "another host"), through the command line: a
``Docker-Content-Digest`` that names other bytes is refused (exit 8) and ``import --resolve``
stages nothing; credentials never follow a redirect to another host, never go over plain HTTP;
an answer larger than 4 MiB is refused without reading it all; a 429's ``Retry-After`` is
waited for up to a bound. Needs only openssl; the lying registry in front of the local registry
(scripts/local-registry) for the digest check through the real registry."""

from __future__ import annotations

import base64
import gzip
import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from lying_registry import Answer, lying_registry
from resolve_site import ResolveSite
from scripted_registry import (
    LIST_V2,
    OCI_INDEX,
    V2S2,
    Dribble,
    ScriptedRegistry,
    Sink,
    TokenService,
    closing,
    digest_of,
    index_bytes,
    manifest_bytes,
)
from slurm_image.adapters.oci_registry import HttpRegistry
from slurm_image.adapters.registry_signatures import RegistrySignatures
from slurm_image.domain.manifest import ACCEPT
from slurm_image.domain.signatures import bundle_tag
from slurm_image.ports.registry import AnswerRefused, ManifestRequest, RegistryUnavailable
from slurm_image.ports.signatures import SignatureRequest
from support import unavailable
from tls_material import TlsMaterial, make_tls_material

LOGIN, PASSWORD = "alice", "canary-hostile-5d4c3b2a"
REPOSITORY = "team/app"
DATA = manifest_bytes("hostile")


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("hostile-tls"))


def netrc_for(server: ScriptedRegistry, password: str = PASSWORD) -> str:
    return f"machine {server.address} login {LOGIN} password {password}\n"


def logins(seen: list) -> list[str]:  # type: ignore[type-arg]
    return [
        base64.b64decode(s.authorization[6:]).decode().split(":")[0]
        for s in seen
        if s.authorization and s.authorization.startswith("Basic ")
    ]


def test_a_digest_header_that_names_other_bytes_is_refused_and_nothing_is_staged(
    tmp_path: Path,
) -> None:
    try:
        urllib.request.urlopen("http://127.0.0.1:5000/v2/", timeout=3)
    except OSError:
        unavailable("no registry answers on 127.0.0.1:5000 (scripts/local-registry up)")
    with lying_registry(repositories=("slurm-image-test/client",)) as registry:
        genuine = registry.fetch("/v2/slurm-image-test/client/manifests/1", ACCEPT)[2]
        assert genuine, (
            "the local registry holds no slurm-image-test/client:1 (scripts/test-images)"
        )
        lie = digest_of(genuine + b" ")
        registry.answer(
            Answer("/v2/slurm-image-test/client/manifests/1", genuine, content_digest=lie)
        )
        site = ResolveSite(tmp_path, allow_http=True)
        tag = f"{registry.address}/slurm-image-test/client:1"

        resolved = site.run("resolve", tag)
        assert resolved.returncode == 8, resolved.stderr
        assert lie in resolved.stderr and digest_of(genuine) in resolved.stderr
        assert len(resolved.stderr.strip().splitlines()) == 1
        assert resolved.stdout == ""

        imported = site.run("import", tag, "--resolve", "--name", "app", "--role", "client")
        assert imported.returncode == 8, imported.stderr
        assert site.staged() == []

        registry.answers.clear()  # the truth: the same bytes, their own digest
        assert site.json("resolve", tag)["digest"] == digest_of(genuine)


def test_credentials_never_follow_a_redirect_to_another_host(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    sink = Sink("127.0.0.2", tls.server_context(), answer=(200, DATA, V2S2))
    registry = ScriptedRegistry(
        "127.0.0.1", tls.server_context(), auth="basic", accounts={LOGIN: PASSWORD}
    )
    with closing(sink, registry):
        registry.put(REPOSITORY, "1", DATA)
        registry.script(REPOSITORY, "1", redirect=f"{sink.url}/elsewhere/manifest")
        site = ResolveSite(tmp_path, netrc=netrc_for(registry), ca_file=tls.ca_file)

        resolved = site.json("resolve", f"{registry.address}/{REPOSITORY}:1")

        assert resolved["digest"] == digest_of(DATA)
        assert logins(registry.seen) == [LOGIN]  # the registry itself was answered its challenge
        assert [seen.path for seen in sink.seen] == ["/elsewhere/manifest"]
        assert [seen.authorization for seen in sink.seen] == [None]


def test_a_bearer_token_never_follows_a_redirect_to_another_host(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    tokens = TokenService("127.0.0.2", tls.server_context(), {LOGIN: PASSWORD}, set())
    sink = Sink("127.0.0.2", tls.server_context(), answer=(200, DATA, V2S2))
    registry = ScriptedRegistry("127.0.0.1", tls.server_context(), auth="bearer", tokens=tokens)
    with closing(tokens, sink, registry):
        registry.put(REPOSITORY, "1", DATA)
        registry.script(REPOSITORY, "1", redirect=f"{sink.url}/blob-store/manifest")
        site = ResolveSite(tmp_path, netrc=netrc_for(registry), ca_file=tls.ca_file)

        assert site.json("resolve", f"{registry.address}/{REPOSITORY}:1")["digest"] == digest_of(
            DATA
        )
        assert logins(tokens.server.seen) == [LOGIN]  # the realm the registry named
        bearer = [s.authorization for s in registry.seen if s.authorization]
        assert bearer and all(value.startswith("Bearer ") for value in bearer)
        assert [seen.authorization for seen in sink.seen] == [None]


def test_a_redirect_to_plain_http_is_refused_and_the_other_host_hears_nothing(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    sink = Sink("127.0.0.2", None, answer=(200, DATA, V2S2))
    registry = ScriptedRegistry(
        "127.0.0.1", tls.server_context(), auth="basic", accounts={LOGIN: PASSWORD}
    )
    with closing(sink, registry):
        registry.put(REPOSITORY, "1", DATA)
        registry.script(REPOSITORY, "1", redirect=f"{sink.url}/manifest")
        site = ResolveSite(tmp_path, netrc=netrc_for(registry), ca_file=tls.ca_file)

        resolved = site.run("resolve", f"{registry.address}/{REPOSITORY}:1")

        assert resolved.returncode == 8, resolved.stderr
        assert "plain HTTP" in resolved.stderr
        assert sink.seen == []


def test_a_redirect_to_a_url_holding_credentials_is_refused(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    sink = Sink("127.0.0.2", tls.server_context(), answer=(200, DATA, V2S2))
    registry = ScriptedRegistry("127.0.0.1", tls.server_context())
    with closing(sink, registry):
        registry.put(REPOSITORY, "1", DATA)
        host_port = sink.url.split("://", 1)[1]
        registry.script(REPOSITORY, "1", redirect=f"https://planted:pw@{host_port}/manifest")
        resolved = ResolveSite(tmp_path, ca_file=tls.ca_file).run(
            "resolve", f"{registry.address}/{REPOSITORY}:1"
        )
        assert resolved.returncode == 8, resolved.stderr
        assert "credentials in it" in resolved.stderr
        assert sink.seen == []


def test_a_registry_that_stalls_mid_answer_is_given_up_on_within_the_timeout(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    registry = ScriptedRegistry("127.0.0.1", tls.server_context())
    with closing(registry):
        registry.put(REPOSITORY, "1", DATA)
        registry.script(REPOSITORY, "1", stall_after=10)
        resolved = ResolveSite(tmp_path, ca_file=tls.ca_file).run(
            "resolve", f"{registry.address}/{REPOSITORY}:1", "--timeout", "2"
        )
        assert resolved.returncode == 3, resolved.stderr
        assert "within 2 s" in resolved.stderr


def finished(answers: Callable[[], list[bool]]) -> bool:
    """Whether the one dribbled answer was sent to its end (waiting for the server to know:
    its next byte fails once the client hung up)."""
    stop = time.monotonic() + 30
    while not answers() and time.monotonic() < stop:
        time.sleep(0.05)
    (done,) = answers()
    return done


@pytest.mark.parametrize("part", ["headers", "body"])
def test_a_registry_that_dribbles_its_answer_is_cut_off_at_the_timeout(
    tmp_path: Path, tls: TlsMaterial, part: str
) -> None:
    registry = ScriptedRegistry("127.0.0.1", tls.server_context())
    with closing(registry):
        registry.put(REPOSITORY, "1", DATA)
        registry.script(REPOSITORY, "1", dribble=Dribble(part, every=0.25, count=40))
        resolved = ResolveSite(tmp_path, ca_file=tls.ca_file).run(
            "resolve", f"{registry.address}/{REPOSITORY}:1", "--timeout", "2", timeout=60
        )
        assert resolved.returncode == 3, resolved.stderr
        assert "did not answer in time (within 2 s, retries included)" in resolved.stderr
        path = f"/v2/{REPOSITORY}/manifests/1"
        assert not finished(lambda: [registry.finished[path]] if path in registry.finished else [])


def test_a_token_realm_that_dribbles_its_answer_is_cut_off_at_the_timeout(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    tokens = TokenService(
        "127.0.0.2", tls.server_context(), {}, {REPOSITORY}, dribble=Dribble("headers")
    )
    registry = ScriptedRegistry("127.0.0.1", tls.server_context(), auth="bearer", tokens=tokens)
    with closing(tokens, registry):
        registry.put(REPOSITORY, "1", DATA)
        resolved = ResolveSite(tmp_path, ca_file=tls.ca_file).run(
            "resolve", f"{registry.address}/{REPOSITORY}:1", "--timeout", "2", timeout=60
        )
        assert resolved.returncode == 3, resolved.stderr
        assert "127.0.0.2: 127.0.0.2 did not answer in time (within 2 s" in resolved.stderr
        assert len(tokens.requests) == 1
        assert not finished(lambda: tokens.finished)


def test_a_signature_lookup_whose_registry_dribbles_ends_within_its_timeout(
    tls: TlsMaterial, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_file))
    pin = digest_of(DATA)
    tag = bundle_tag(pin)
    registry = ScriptedRegistry("127.0.0.1", tls.server_context())
    with closing(registry):
        index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []})
        registry.put(REPOSITORY, tag, index.encode(), OCI_INDEX)
        registry.script(REPOSITORY, tag, dribble=Dribble("body"))
        lookup = RegistrySignatures(HttpRegistry()).signatures_of(
            SignatureRequest(registry.address, REPOSITORY, pin, max_bytes=1 << 20, timeout_s=2)
        )
        with pytest.raises(RegistryUnavailable) as caught:
            list(lookup)
        assert "did not answer in time (within 2 s" in caught.value.rule
        path = f"/v2/{REPOSITORY}/manifests/{tag}"
        assert not finished(lambda: [registry.finished[path]] if path in registry.finished else [])


def test_another_host_asking_for_credentials_after_a_redirect_gets_none(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    other = ScriptedRegistry(
        "127.0.0.2", tls.server_context(), auth="basic", accounts={LOGIN: PASSWORD}
    )
    registry = ScriptedRegistry(
        "127.0.0.1", tls.server_context(), auth="basic", accounts={LOGIN: PASSWORD}
    )
    with closing(other, registry):
        other.put(REPOSITORY, "1", DATA)
        registry.put(REPOSITORY, "1", DATA)
        registry.script(
            REPOSITORY, "1", redirect=f"https://{other.address}/v2/{REPOSITORY}/manifests/1"
        )
        site = ResolveSite(tmp_path, netrc=netrc_for(registry), ca_file=tls.ca_file)

        resolved = site.run("resolve", f"{registry.address}/{REPOSITORY}:1")

        assert resolved.returncode == 3, resolved.stderr
        assert "127.0.0.2" in resolved.stderr
        assert [seen.authorization for seen in other.seen] == [None]
        assert PASSWORD not in resolved.stderr + resolved.stdout


def test_a_refusal_that_echoes_the_login_it_received_is_printed_without_it(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    registry = ScriptedRegistry(
        "127.0.0.1", tls.server_context(), auth="basic", accounts={LOGIN: PASSWORD}
    )
    with closing(registry):
        registry.put(REPOSITORY, "1", DATA)
        registry.script(REPOSITORY, "1", denial="you sent {authorization}\r\nX-Evil: 1")
        site = ResolveSite(tmp_path, netrc=netrc_for(registry), ca_file=tls.ca_file)

        resolved = site.run("resolve", f"{registry.address}/{REPOSITORY}:1")

        assert resolved.returncode == 3, resolved.stderr
        assert "DENIED: you sent Basic <credential removed>X-Evil: 1" in resolved.stderr
        basic = base64.b64encode(f"{LOGIN}:{PASSWORD}".encode()).decode()
        for secret in (basic, basic[:24], PASSWORD):
            assert secret not in resolved.stderr + resolved.stdout
        assert len(resolved.stderr.strip().splitlines()) == 1


def test_a_bearer_realm_over_plain_http_never_gets_the_login(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    tokens = TokenService("127.0.0.2", None, {LOGIN: PASSWORD}, set())
    registry = ScriptedRegistry("127.0.0.1", tls.server_context(), auth="bearer", tokens=tokens)
    with closing(tokens, registry):
        registry.put(REPOSITORY, "1", DATA)
        site = ResolveSite(tmp_path, netrc=netrc_for(registry), ca_file=tls.ca_file)

        refused = site.run("resolve", f"{registry.address}/{REPOSITORY}:1")
        assert refused.returncode == 8, refused.stderr
        assert "plain HTTP" in refused.stderr

        allowed = ResolveSite(
            tmp_path / "http-allowed", netrc=netrc_for(registry), ca_file=tls.ca_file,
            allow_http=True,
        )  # fmt: skip
        asked = allowed.run("resolve", f"{registry.address}/{REPOSITORY}:1")
        assert asked.returncode == 3, asked.stderr  # anonymous, and the repository is private
        assert logins(tokens.server.seen) == []
        assert len(tokens.requests) == 1


def test_a_manifest_over_4_mib_is_refused_without_reading_it_all(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    registry = ScriptedRegistry("127.0.0.1", tls.server_context())
    with closing(registry):
        registry.put(REPOSITORY, "1", DATA)
        size = 64 * 1024 * 1024
        registry.script(REPOSITORY, "1", chunked_size=size)
        site = ResolveSite(tmp_path, ca_file=tls.ca_file)
        tag = f"{registry.address}/{REPOSITORY}:1"

        resolved = site.run("resolve", tag)
        assert resolved.returncode == 8, resolved.stderr
        assert str(4 * 1024 * 1024) in resolved.stderr
        path = f"/v2/{REPOSITORY}/manifests/1"
        assert registry.sent_bytes[path] < size // 2  # the client hung up long before the end

        imported = site.run("import", tag, "--resolve", "--name", "app", "--role", "client")
        assert imported.returncode == 8, imported.stderr
        assert site.staged() == []


def test_an_index_is_resolved_over_tls_with_the_manifest_of_each_architecture(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    amd64, arm64 = manifest_bytes("multi", "amd64"), manifest_bytes("multi", "arm64")
    index = index_bytes([("amd64", amd64), ("arm64", arm64)])
    registry = ScriptedRegistry("127.0.0.1", tls.server_context())
    with closing(registry):
        registry.put(REPOSITORY, "1", index, LIST_V2)
        site = ResolveSite(tmp_path, ca_file=tls.ca_file)
        answer = site.json("resolve", f"{registry.address}/{REPOSITORY}:1", "--arch", "aarch64")
        assert answer["pinned"] == f"{registry.address}/{REPOSITORY}:1@{digest_of(index)}"
        assert answer["manifest"] == digest_of(arm64)
        assert [m["platform"]["architecture"] for m in answer["manifests"]] == ["amd64", "arm64"]
        missing = site.run("resolve", f"{registry.address}/{REPOSITORY}:1", "--arch", "ppc64le")
        assert missing.returncode == 2
        assert "linux/amd64, linux/arm64" in missing.stderr


def test_a_certificate_the_system_store_does_not_trust_is_refused(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    registry = ScriptedRegistry("127.0.0.1", tls.server_context())
    with closing(registry):
        registry.put(REPOSITORY, "1", DATA)
        site = ResolveSite(tmp_path)  # no SSL_CERT_FILE: the test CA is not trusted
        resolved = site.run("resolve", f"{registry.address}/{REPOSITORY}:1")
        assert resolved.returncode == 3, resolved.stderr
        assert "certificate" in resolved.stderr
        assert registry.seen == []


def test_retry_after_is_waited_for_up_to_its_bound(tls: TlsMaterial, monkeypatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_file))
    registry = ScriptedRegistry("127.0.0.1", tls.server_context())
    with closing(registry):
        registry.put(REPOSITORY, "1", DATA)
        waits: list[float] = []
        adapter = HttpRegistry(sleep=waits.append, retry_after_max_s=30)
        request = ManifestRequest(
            registry.address, REPOSITORY, "1", ACCEPT, max_bytes=1 << 20, timeout_s=60
        )

        registry.script(REPOSITORY, "1", failures=[(429, "7"), (503, None)])
        assert adapter.fetch_manifest(request).data == DATA
        assert waits == [7.0, 1.0]  # the registry's Retry-After, then the backoff's second wait

        registry.script(REPOSITORY, "1", failures=[(429, "3600")])
        before = len(registry.seen)
        with pytest.raises(RegistryUnavailable) as caught:
            adapter.fetch_manifest(request)
        assert "3600" in caught.value.rule
        assert len(registry.seen) == before + 1  # not asked again


def test_an_encoded_answer_is_refused(tls: TlsMaterial, monkeypatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_file))
    encoded = gzip.compress(DATA)
    sink = Sink("127.0.0.1", tls.server_context(), answer=(200, encoded, V2S2), encoding="gzip")
    with closing(sink):
        adapter = HttpRegistry(sleep=lambda _: None)
        request = ManifestRequest(
            sink.server.address, REPOSITORY, "1", ACCEPT, max_bytes=1 << 20, timeout_s=20
        )
        with pytest.raises(AnswerRefused) as caught:
            adapter.fetch_manifest(request)
        assert "gzip-encoded" in caught.value.rule


def test_the_json_of_an_index_names_its_media_type_and_no_manifest_without_arch(
    tmp_path: Path, tls: TlsMaterial
) -> None:
    index = index_bytes([("amd64", manifest_bytes("x"))])
    registry = ScriptedRegistry("127.0.0.1", tls.server_context())
    with closing(registry):
        registry.put(REPOSITORY, "1", index, LIST_V2)
        answer = ResolveSite(tmp_path, ca_file=tls.ca_file).json(
            "resolve", f"{registry.address}/{REPOSITORY}:1"
        )
        assert (answer["media_type"], answer["index"]) == (LIST_V2, True)
        assert (answer["architecture"], answer["manifest"]) == (None, None)
