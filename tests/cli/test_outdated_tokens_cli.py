"""``outdated`` over published entries from two registries whose Bearer challenges name one
token realm (docs/design.md, "Registry authentication"): the token the realm issued for one
registry is never sent to the other, even for the same repository path and the same login.
The command line runs in this process with the real ``HttpRegistry`` (one per command, as in
the product) against two TLS registries and a token service served here; the imports behind
the entries run on the fake scheduler."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_site import CliSite, fake_scheduler
from scripted_registry import ScriptedRegistry, TokenService, closing, digest_of, manifest_bytes
from tls_material import TlsMaterial, make_tls_material

LOGIN, PASSWORD = "$oauthtoken", "canary-api-key-6e5d4c"
REPOSITORY = "team/app"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tokens-tls"))


@pytest.fixture
def registries(tls: TlsMaterial) -> Iterator[tuple[ScriptedRegistry, ScriptedRegistry]]:
    realm = TokenService("127.0.0.2", tls.server_context(), {LOGIN: PASSWORD}, set())
    victim = ScriptedRegistry("127.0.0.1", tls.server_context(), auth="bearer", tokens=realm)
    # Another registry whose challenge names the victim's realm and service.
    other = ScriptedRegistry("127.0.0.1", tls.server_context(), auth="bearer", tokens=realm)
    with closing(realm, victim, other):
        victim.put(REPOSITORY, "1", manifest_bytes("victim"))
        other.put(REPOSITORY, "1", manifest_bytes("other"))
        yield victim, other


def bearer_tokens(registry: ScriptedRegistry, since: int = 0) -> set[str]:
    return {
        seen.authorization
        for seen in registry.seen[since:]
        if seen.authorization and seen.authorization.startswith("Bearer ")
    }


def test_outdated_never_sends_one_registrys_token_to_another_naming_its_realm(
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
    tls: TlsMaterial,
    registries: tuple[ScriptedRegistry, ScriptedRegistry],
) -> None:
    victim, other = registries
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "slurm-image.toml").write_text(
        f'workspace_root = "{root}"\n'
        "[image_build]\n"
        'partition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
        '[enroot]\ncredentials_file = "~/netrc"\n'
        '[submitter]\nkind = "fake"\n'
    )
    netrc = tmp_path / "netrc"  # the same login on both, as NGC's $oauthtoken is everywhere
    netrc.write_text(
        "".join(
            f"machine {registry.address} login {LOGIN} password {PASSWORD}\n"
            for registry in (victim, other)
        )
    )
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_file))
    site = CliSite(root, capsys, fake_scheduler(tmp_path, monkeypatch))
    for name, registry in (("victim", victim), ("other", other)):
        tag = f"{registry.address}/{REPOSITORY}:1"
        site.publish_resolved(tag, name, digest_of(manifest_bytes(name)))
    before = (len(victim.seen), len(other.seen))

    code, out, err = site.run("outdated", "victim", "other")

    assert code == 0, err
    assert [line.split()[2] for line in out.splitlines()[1:]] == ["current", "current"]
    victims = bearer_tokens(victim, before[0])
    others = bearer_tokens(other, before[1])
    assert victims and others  # each was sent a token, in one process
    assert not victims & others
