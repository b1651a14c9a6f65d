"""``outdated`` against registries served here over TLS, with the real ``HttpRegistry`` (one
per command, as in the product) and the command line in this process; the imports behind the
published entries run on the fake scheduler (docs/design.md, "Registry authentication" and
"Outdated"):

- two registries whose Bearer challenges name one token realm: the token the realm issued for
  one is never sent to the other, even for the same repository path and the same login;
- ``--timeout`` bounds the whole command: the tags asked after the time is spent fail."""

from __future__ import annotations

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
    return make_tls_material(tmp_path_factory.mktemp("outdated-tls"))


def site_for(
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
    tls: TlsMaterial,
    logins: list[ScriptedRegistry],
) -> CliSite:
    """A site whose netrc holds the same login for each of ``logins`` (as NGC's
    ``$oauthtoken`` is everywhere), trusting the test CA."""
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "slurm-image.toml").write_text(
        f'workspace_root = "{root}"\n'
        "[image_build]\n"
        'partition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
        '[enroot]\ncredentials_file = "~/netrc"\n'
        '[submitter]\nkind = "fake"\n'
    )
    netrc = tmp_path / "netrc"
    netrc.write_text(
        "".join(f"machine {r.address} login {LOGIN} password {PASSWORD}\n" for r in logins)
    )
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_file))
    return CliSite(root, capsys, fake_scheduler(tmp_path, monkeypatch))


def bearer_tokens(registry: ScriptedRegistry, since: int = 0) -> set[str]:
    return {
        seen.authorization
        for seen in registry.seen[since:]
        if seen.authorization and seen.authorization.startswith("Bearer ")
    }


def states(out: str) -> dict[str, str]:
    return {line.split()[0]: line.split()[2] for line in out.splitlines()[1:]}


def test_outdated_never_sends_one_registrys_token_to_another_naming_its_realm(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, tls: TlsMaterial
) -> None:
    realm = TokenService("127.0.0.2", tls.server_context(), {LOGIN: PASSWORD}, set())
    victim = ScriptedRegistry("127.0.0.1", tls.server_context(), auth="bearer", tokens=realm)
    # Another registry whose challenge names the victim's realm and service.
    other = ScriptedRegistry("127.0.0.1", tls.server_context(), auth="bearer", tokens=realm)
    with closing(realm, victim, other):
        site = site_for(tmp_path, capsys, monkeypatch, tls, [victim, other])
        for name, registry in (("victim", victim), ("other", other)):
            registry.put(REPOSITORY, "1", manifest_bytes(name))
            tag = f"{registry.address}/{REPOSITORY}:1"
            site.publish_resolved(tag, name, digest_of(manifest_bytes(name)))
        before = (len(victim.seen), len(other.seen))

        code, out, err = site.run("outdated", "victim", "other")

        assert code == 0, err
        assert states(out) == {"victim": "current", "other": "current"}
        victims = bearer_tokens(victim, before[0])
        others = bearer_tokens(other, before[1])
        assert victims and others  # each was sent a token, in one process
        assert not victims & others


def test_outdated_timeout_bounds_the_whole_command(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, tls: TlsMaterial
) -> None:
    registry = ScriptedRegistry("127.0.0.1", tls.server_context())
    with closing(registry):
        site = site_for(tmp_path, capsys, monkeypatch, tls, [])
        for name in ("one", "two"):
            registry.put(REPOSITORY, name, manifest_bytes(name))
            tag = f"{registry.address}/{REPOSITORY}:{name}"
            site.publish_resolved(tag, name, digest_of(manifest_bytes(name)))
            registry.script(REPOSITORY, name, delay=1.5)  # each answer now takes 1.5 s

        code, out, err = site.run("outdated", "one", "two", "--timeout", "2")

        assert code == 3, err
        assert states(out) == {"one": "current", "two": "failed"}
        assert "127.0.0.1 did not answer in time (within 0." in out
