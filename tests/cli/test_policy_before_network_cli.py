"""Policy before the network (docs/design.md, "Image policy and signatures"): a tag outside
``[policy] allowed_registries`` is refused with exit 2 before any request reaches its registry,
so that registry never sees the user's netrc login: ``resolve``, ``import --resolve`` (dry run
or not) and ``outdated`` over an entry resolved from it. The registry is a real one served here
over TLS with Basic authentication (the user's netrc holds its login); it records every request
it gets. The command line runs in this process with the real HTTP registry client and the fake
scheduler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_site import CliSite, fake_scheduler
from publish_support import SQSH_BYTES, chain_json, inspection
from scripted_registry import ScriptedRegistry, digest_of, manifest_bytes
from slurm_image.domain.paths import AttemptLayout
from tls_material import TlsMaterial, make_tls_material

LOGIN, PASSWORD = "alice", "canary-policy-7e6d5c"
REPOSITORY = "team/app"
DATA = manifest_bytes("policy")
ELSEWHERE = '["registry.example.org/team"]'
"""The only registry the policy of these tests allows: not the one served here."""
OUTSIDE = (
    "source: is outside policy.allowed_registries (registry.example.org/team): the registry and"
    " the start of the repository path must be one of them, whole path components only"
)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("policy-tls"))


@pytest.fixture
def registry(tls: TlsMaterial) -> Any:
    served = ScriptedRegistry(
        "127.0.0.1", tls.server_context(), auth="basic", accounts={LOGIN: PASSWORD}
    )
    served.put(REPOSITORY, "1", DATA)
    yield served
    served.close()


class Site(CliSite):
    def staged(self) -> list[Path]:
        jobs = self.root / "images" / ".tmp" / "jobs"
        return sorted(jobs.iterdir()) if jobs.is_dir() else []


@pytest.fixture
def site(
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
    tls: TlsMaterial,
    registry: ScriptedRegistry,
) -> Site:
    root = tmp_path / "ws"
    root.mkdir(mode=0o700)
    (tmp_path / "slurm-image.toml").write_text(
        f'workspace_root = "{root}"\n'
        "[image_build]\n"
        'partition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
        'arch = "x86_64"\n'
        '[enroot]\ncredentials_file = "~/netrc"\n'
        '[submitter]\nkind = "fake"\n'
    )
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine {registry.address} login {LOGIN} password {PASSWORD}\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_file))
    return Site(root, capsys, fake_scheduler(tmp_path, monkeypatch))


def allow_only_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_IMAGE_POLICY__ALLOWED_REGISTRIES", ELSEWHERE)


@pytest.mark.parametrize(
    "command",
    [
        ["resolve", "{tag}"],
        ["resolve", "{tag}", "--arch", "x86_64"],
        ["import", "{tag}", "--resolve", "--name", "app", "--role", "client", "--dry-run"],
        ["import", "{tag}", "--resolve", "--name", "app", "--role", "client"],
    ],
)
def test_a_tag_outside_the_policy_exits_2_and_its_registry_hears_nothing(
    site: Site,
    registry: ScriptedRegistry,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
) -> None:
    allow_only_elsewhere(monkeypatch)
    tag = f"{registry.address}/{REPOSITORY}:1"
    code, out, err = site.run(*(part.format(tag=tag) for part in command))
    assert code == 2, err
    assert err == f"slurm-image: error: {OUTSIDE}\n"
    assert out == ""
    assert registry.seen == []
    assert site.staged() == []


def test_the_same_tag_is_resolved_once_the_policy_allows_its_registry(
    site: Site, registry: ScriptedRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_IMAGE_POLICY__ALLOWED_REGISTRIES", f'["{registry.address}/team"]')
    resolved = site.json("resolve", f"{registry.address}/{REPOSITORY}:1")
    assert resolved["digest"] == digest_of(DATA)
    assert registry.seen  # the registry was asked, and is seen to be


def test_outdated_of_an_entry_whose_registry_the_policy_no_longer_allows_asks_nothing(
    site: Site, registry: ScriptedRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = f"{registry.address}/{REPOSITORY}:1"
    submitted = site.json("import", tag, "--resolve", "--name", "app", "--role", "client")
    attempt = AttemptLayout(str(site.root), submitted["lifecycle_id"])
    Path(attempt.in_job("candidate.sqsh")).write_bytes(SQSH_BYTES)
    Path(attempt.in_job("output/inspection.json")).write_bytes(inspection("client", SQSH_BYTES))
    Path(attempt.chain_record).write_bytes(chain_json(digest_of(DATA)))
    Path(attempt.architecture_record).write_bytes(b"x86_64\n")
    site.scheduler.finish(submitted["job_id"])
    site.json("publish", submitted["lifecycle_id"])
    assert site.json("outdated")["images"][0]["state"] == "current"
    asked = len(registry.seen)

    allow_only_elsewhere(monkeypatch)
    code, out, err = site.run("outdated", "--json")

    assert code == 2, err
    (entry,) = json.loads(out)["images"]
    assert (entry["name"], entry["state"]) == ("app", "failed")
    assert OUTSIDE in err
    assert len(registry.seen) == asked


def refusals(site: Site) -> list[tuple[str, str | None, str | None, int]]:
    """The ``refused`` events of the store's history: rule, source, alias, exit code."""
    lines = [
        json.loads(line)
        for month in sorted((site.root / "images" / "history").glob("*.jsonl"))
        for line in month.read_text().splitlines()
    ]
    return [
        (e["rule"], e["source"], e["alias"], e["exit_code"])
        for e in lines
        if e["event"] == "refused"
    ]


def test_resolve_and_outdated_record_a_tag_the_policy_refuses_and_a_dry_run_does_not(
    site: Site, registry: ScriptedRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = f"{registry.address}/{REPOSITORY}:1"
    submitted = site.json("import", tag, "--resolve", "--name", "app", "--role", "client")
    attempt = AttemptLayout(str(site.root), submitted["lifecycle_id"])
    Path(attempt.in_job("candidate.sqsh")).write_bytes(SQSH_BYTES)
    Path(attempt.in_job("output/inspection.json")).write_bytes(inspection("client", SQSH_BYTES))
    Path(attempt.chain_record).write_bytes(chain_json(digest_of(DATA)))
    Path(attempt.architecture_record).write_bytes(b"x86_64\n")
    site.scheduler.finish(submitted["job_id"])
    site.json("publish", submitted["lifecycle_id"])
    allow_only_elsewhere(monkeypatch)

    dry_run = ("import", tag, "--resolve", "--name", "b", "--role", "client", "--dry-run")
    assert site.run(*dry_run)[0] == 2
    assert refusals(site) == [], "a dry run attempts nothing"
    assert site.run("resolve", tag)[0] == 2
    assert refusals(site) == [("source_not_allowed", tag, None, 2)]
    assert site.run("outdated")[0] == 2
    assert refusals(site)[1:] == [("source_not_allowed", tag, "app", 2)]
