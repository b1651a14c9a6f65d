"""The Registry port, against every adapter: the HTTP one (``HttpRegistry``) against registries
served here over TLS (anonymous, Basic, and Bearer with a token service on another loopback
address), and ``MemoryRegistry``. Both answer the bytes as sent, authenticate as the registry
asks, send a login only where the port allows, keep a token for its lifetime, and bound what
they read (ports/registry.py)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import pytest

from scripted_registry import V2S2, Dribble, ScriptedRegistry, TokenService, manifest_bytes
from slurm_image.adapters.memory import MemoryRegistry
from slurm_image.adapters.oci_registry import HttpRegistry
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.manifest import ACCEPT
from slurm_image.ports.registry import (
    AnswerTooLarge,
    ManifestRequest,
    Registry,
    RegistryAuthFailed,
    RegistryNotFound,
    RegistryUnavailable,
)
from tls_material import TlsMaterial, make_tls_material

LOGIN, PASSWORD = "alice", "canary-password-7f3e9a"
REPOSITORY = "team/app"
DATA = manifest_bytes("contract")


class Harness(Protocol):
    registry: Registry

    def serve(
        self,
        auth: str = "anonymous",
        *,
        tls: bool = True,
        public: tuple[str, ...] = (),
        token_lifetime: int = 300,
        realm_of: str | None = None,
    ) -> str:
        """A new registry holding ``DATA`` as ``REPOSITORY:1``; its host[:port]. ``realm_of``:
        a Bearer registry whose challenge names the token realm of that one."""
        ...

    def lie(self, address: str, content_digest: str) -> None:
        """Make ``REPOSITORY:1`` answer ``content_digest`` as its Docker-Content-Digest."""
        ...

    def deny(self, address: str, message: str) -> None:
        """Make ``REPOSITORY:1`` answer 403 with ``message``, ``{authorization}`` in it replaced
        by the Authorization the registry received."""
        ...

    def tokens_issued(self) -> list[str]:
        """Every token the registries' realms issued."""
        ...

    def dribble(self, address: str) -> None:
        """Make ``REPOSITORY:1`` answer slower than any test's deadline, without ever pausing
        long (HTTP: a byte of its headers every 0.25 s for 10 s)."""
        ...

    def logins(self) -> list[tuple[str, str]]:
        """(``registry`` or ``realm``, login) for every login sent so far."""
        ...

    def token_requests(self) -> int: ...

    def advance(self, seconds: float) -> None: ...


@pytest.fixture(scope="session")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("registry-tls"))


@dataclass
class HttpHarness:
    tls_material: TlsMaterial
    now: list[float] = field(default_factory=lambda: [1000.0])
    servers: list[ScriptedRegistry | TokenService] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.registry = HttpRegistry(sleep=lambda _: None, monotonic=lambda: self.now[0])
        self.registries: dict[str, ScriptedRegistry] = {}

    def serve(
        self,
        auth: str = "anonymous",
        *,
        tls: bool = True,
        public: tuple[str, ...] = (),
        token_lifetime: int = 300,
        realm_of: str | None = None,
    ) -> str:
        context = self.tls_material.server_context() if tls else None
        tokens = None
        if realm_of is not None:
            tokens = self.registries[realm_of].tokens
        elif auth == "bearer":  # the realm is another host, as auth.docker.io is for Docker Hub
            tokens = TokenService(
                "127.0.0.2",
                self.tls_material.server_context(),
                {LOGIN: PASSWORD},
                set(public),
                lifetime=token_lifetime,
            )
            self.servers.append(tokens)
        server = ScriptedRegistry(
            "127.0.0.1", context, auth=auth, accounts={LOGIN: PASSWORD}, tokens=tokens
        )
        self.servers.append(server)
        server.put(REPOSITORY, "1", DATA)
        self.registries[server.address] = server
        return server.address

    def lie(self, address: str, content_digest: str) -> None:
        self.registries[address].script(REPOSITORY, "1", content_digest=content_digest)

    def deny(self, address: str, message: str) -> None:
        self.registries[address].script(REPOSITORY, "1", denial=message)

    def dribble(self, address: str) -> None:
        self.registries[address].script(REPOSITORY, "1", dribble=Dribble("headers"))

    def tokens_issued(self) -> list[str]:
        return [
            token
            for server in self.servers
            if isinstance(server, TokenService)
            for token in server.issued
        ]

    def logins(self) -> list[tuple[str, str]]:
        found = []
        for server in self.servers:
            where = "realm" if isinstance(server, TokenService) else "registry"
            for seen in server.server.seen:
                if seen.authorization and seen.authorization.startswith("Basic "):
                    login = base64.b64decode(seen.authorization[6:]).decode().split(":")[0]
                    found.append((where, login))
        return found

    def token_requests(self) -> int:
        return sum(
            len(server.requests) for server in self.servers if isinstance(server, TokenService)
        )

    def advance(self, seconds: float) -> None:
        self.now[0] += seconds

    def close(self) -> None:
        for server in self.servers:
            server.close()


@dataclass
class MemoryHarness:
    registry: MemoryRegistry = field(default_factory=MemoryRegistry)
    count: int = 0

    def serve(
        self,
        auth: str = "anonymous",
        *,
        tls: bool = True,
        public: tuple[str, ...] = (),
        token_lifetime: int = 300,
        realm_of: str | None = None,
    ) -> str:
        self.count += 1
        address = f"registry{self.count}.example.org:5000"
        realm = f"auth{self.count}.example.org"
        self.registry.host(
            address,
            tls=tls,
            auth=auth,
            accounts={LOGIN: PASSWORD},
            public=set(public),
            token_lifetime_s=token_lifetime,
            realm=self.registry.hosts[realm_of].realm if realm_of is not None else realm,
        )
        if realm_of is not None:  # one realm: its accounts and public repositories
            shared = self.registry.hosts[realm_of]
            self.registry.hosts[address].public = shared.public
            self.registry.hosts[address].accounts = shared.accounts
        self.registry.put(address, REPOSITORY, "1", DATA, V2S2)
        return address

    def lie(self, address: str, content_digest: str) -> None:
        manifest = self.registry.hosts[address].manifests[(REPOSITORY, "1")]
        manifest.content_digest = content_digest

    def deny(self, address: str, message: str) -> None:
        self.registry.hosts[address].denial = message

    def dribble(self, address: str) -> None:
        self.registry.hosts[address].answer_s = 3600

    def tokens_issued(self) -> list[str]:
        return list(self.registry.issued)

    def logins(self) -> list[tuple[str, str]]:
        return [
            ("registry" if sent.where in self.registry.hosts else "realm", sent.login)
            for sent in self.registry.sent
        ]

    def token_requests(self) -> int:
        return self.registry.token_requests

    def advance(self, seconds: float) -> None:
        self.registry.advance(seconds)


@pytest.fixture(params=["http", "memory"])
def harness(
    request: pytest.FixtureRequest, tls: TlsMaterial, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Harness]:
    if request.param == "memory":
        yield MemoryHarness()
        return
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_file))  # read when the adapter first connects
    built = HttpHarness(tls)
    try:
        yield built
    finally:
        built.close()


def ask(
    harness: Harness,
    address: str,
    *,
    reference: str = "1",
    credentials: RegistryCredentials | None = None,
    allow_http: bool = False,
    max_bytes: int = 4 * 1024 * 1024,
    timeout_s: float = 20,
) -> bytes:
    answer = harness.registry.fetch_manifest(
        ManifestRequest(
            registry=address,
            repository=REPOSITORY,
            reference=reference,
            accept=ACCEPT,
            max_bytes=max_bytes,
            timeout_s=timeout_s,
            allow_http=allow_http,
            credentials=credentials,
        )
    )
    return answer.data


def entry(address: str, password: str = PASSWORD) -> RegistryCredentials:
    host = address.rsplit(":", 1)[0]
    return RegistryCredentials(host, LOGIN, password, machine=host)


def test_adapters_implement_the_port(harness: Harness) -> None:
    assert isinstance(harness.registry, Registry)


def test_an_anonymous_registry_answers_the_bytes_type_and_digest_it_sent(
    harness: Harness,
) -> None:
    address = harness.serve()
    answer = harness.registry.fetch_manifest(
        ManifestRequest(address, REPOSITORY, "1", ACCEPT, max_bytes=1 << 20, timeout_s=20)
    )
    assert answer.data == DATA
    assert answer.content_type == V2S2
    assert answer.content_digest == "sha256:" + hashlib.sha256(DATA).hexdigest()
    assert harness.logins() == []


def test_the_digest_header_is_handed_on_as_the_registry_sent_it(harness: Harness) -> None:
    address = harness.serve()
    lie = "sha256:" + "e" * 64
    harness.lie(address, lie)
    answer = harness.registry.fetch_manifest(
        ManifestRequest(address, REPOSITORY, "1", ACCEPT, max_bytes=1 << 20, timeout_s=20)
    )
    assert (answer.data, answer.content_digest) == (DATA, lie)


def test_a_tag_the_registry_lacks_is_not_found(harness: Harness) -> None:
    address = harness.serve()
    with pytest.raises(RegistryNotFound) as caught:
        ask(harness, address, reference="2")
    assert caught.value.field == address
    assert "team/app:2" in caught.value.rule


def test_an_answer_over_the_bound_is_refused(harness: Harness) -> None:
    address = harness.serve()
    with pytest.raises(AnswerTooLarge) as caught:
        ask(harness, address, max_bytes=len(DATA) - 1)
    assert str(len(DATA) - 1) in caught.value.rule


def test_a_basic_registry_answers_the_entry_and_only_the_registry_saw_it(
    harness: Harness,
) -> None:
    address = harness.serve("basic")
    assert ask(harness, address, credentials=entry(address)) == DATA
    assert set(harness.logins()) == {("registry", LOGIN)}


def test_a_basic_registry_without_credentials_fails_naming_the_registry(
    harness: Harness,
) -> None:
    address = harness.serve("basic")
    with pytest.raises(RegistryAuthFailed) as caught:
        ask(harness, address)
    assert caught.value.field == address
    assert "none were given" in caught.value.rule
    assert harness.logins() == []


@pytest.mark.parametrize("auth", ["basic", "bearer"])
def test_refused_credentials_name_the_entry_and_never_the_password(
    harness: Harness, auth: str
) -> None:
    address = harness.serve(auth)
    wrong = "wrong-canary-1b2c3d"
    with pytest.raises(RegistryAuthFailed) as caught:
        ask(harness, address, credentials=entry(address, wrong))
    message = f"{caught.value.field}: {caught.value.rule}"
    assert f"machine {address.rsplit(':', 1)[0]} login {LOGIN}" in message
    assert wrong not in message and wrong not in repr(caught.value)
    assert PASSWORD not in message


def test_a_bearer_registry_gives_anonymous_tokens_for_a_public_repository(
    harness: Harness,
) -> None:
    address = harness.serve("bearer", public=(REPOSITORY,))
    assert ask(harness, address) == DATA
    assert harness.token_requests() == 1
    assert harness.logins() == []


def test_a_bearer_registry_takes_the_login_at_its_realm_only(harness: Harness) -> None:
    address = harness.serve("bearer")
    assert ask(harness, address, credentials=entry(address)) == DATA
    assert harness.logins() == [("realm", LOGIN)]


def test_a_private_repository_behind_a_bearer_realm_needs_credentials(harness: Harness) -> None:
    address = harness.serve("bearer")
    with pytest.raises(RegistryAuthFailed) as caught:
        ask(harness, address)
    assert "none were given" in caught.value.rule


def test_a_token_serves_until_its_lifetime_ends(harness: Harness) -> None:
    address = harness.serve("bearer", token_lifetime=120)
    for _ in range(3):
        assert ask(harness, address, credentials=entry(address)) == DATA
    assert harness.token_requests() == 1
    harness.advance(121)
    assert ask(harness, address, credentials=entry(address)) == DATA
    assert harness.token_requests() == 2


@pytest.mark.parametrize("login", [True, False], ids=["login", "anonymous"])
def test_a_token_goes_only_to_the_registry_it_was_issued_for(harness: Harness, login: bool) -> None:
    victim = harness.serve("bearer", public=(REPOSITORY,))
    other = harness.serve("bearer", realm_of=victim)  # names the victim's realm and service
    assert ask(harness, victim, credentials=entry(victim) if login else None) == DATA
    assert harness.token_requests() == 1
    assert ask(harness, other, credentials=entry(other) if login else None) == DATA
    assert harness.token_requests() == 2  # its own, never the victim's
    assert ask(harness, victim, credentials=entry(victim) if login else None) == DATA
    assert harness.token_requests() == 2  # each kept for its own registry


@pytest.mark.parametrize("auth", ["anonymous", "bearer"])
def test_a_registry_answering_slower_than_the_deadline_is_given_up_on_at_it(
    harness: Harness, auth: str
) -> None:
    address = harness.serve(auth, public=(REPOSITORY,))
    harness.dribble(address)
    with pytest.raises(RegistryUnavailable) as caught:
        ask(harness, address, timeout_s=1)
    assert caught.value.field == address
    assert "did not answer in time (within 1 s, retries included)" in caught.value.rule


def test_a_plain_http_registry_is_refused_unless_http_is_allowed(harness: Harness) -> None:
    address = harness.serve(tls=False)
    with pytest.raises(RegistryUnavailable) as caught:
        ask(harness, address)
    assert "ENROOT_ALLOW_HTTP" in caught.value.rule
    assert ask(harness, address, allow_http=True) == DATA


@pytest.mark.parametrize("auth", ["basic", "bearer"])
def test_credentials_never_travel_over_plain_http(harness: Harness, auth: str) -> None:
    address = harness.serve(auth, tls=False)
    with pytest.raises(RegistryAuthFailed):
        ask(harness, address, credentials=entry(address), allow_http=True)
    assert harness.logins() == []


@pytest.mark.parametrize("auth", ["basic", "bearer"])
def test_a_refusal_that_echoes_the_credentials_sent_is_quoted_without_them(
    harness: Harness, auth: str
) -> None:
    address = harness.serve(auth)
    harness.deny(address, "no access for \x1b[2J{authorization} [" + "padding " * 100 + "]")
    with pytest.raises(RegistryAuthFailed) as caught:
        ask(harness, address, credentials=entry(address))
    text = f"{caught.value.field}: {caught.value.rule}"
    assert "(403 DENIED: no access for " in text
    assert "<credential removed>" in text
    basic = entry(address).basic().removeprefix("Basic ")
    tokens = harness.tokens_issued()
    assert (auth == "bearer") == bool(tokens)
    for secret in (basic, PASSWORD, *tokens):
        assert secret not in text
    assert "\x1b" not in text and "padding " * 30 not in text
