"""The site policy through the command line (docs/design.md, "The site policy"): a root-owned
``policy.toml`` that ``SLURM_IMAGE_POLICY__*`` overrides and another ``--profile`` cannot
weaken, refused (exit 2, naming it) when anyone but root could change it, and recorded in the
plan. The command line runs in this process against a site file under the test's directory
(the product's path is compiled in; the test points the module at its own), the in-memory
registry (holding no signature) and the fake scheduler."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from dependency_injector import providers

import slurm_image.composition.api as api
from cli_site import CliSite, fake_scheduler
from cosign_artifacts import public_pem
from slurm_image.adapters.memory import MemoryRegistry
from slurm_image.composition import site_policy
from support import unavailable

REGISTRY = "registry.example.org"
PIN = f"{REGISTRY}/team/app:1@sha256:" + "5" * 64
ELSEWHERE = "docker.io/library/ubuntu:24.04@sha256:" + "6" * 64
IMPORT = ("import", PIN, "--name", "app", "--role", "client", "--dry-run")


class Site(CliSite):
    policy_file: Path
    key_file: Path

    def staged(self) -> list[Path]:
        jobs = self.root / "images" / ".tmp" / "jobs"
        return sorted(jobs.iterdir()) if jobs.is_dir() else []

    def site_policy(self, text: str) -> None:
        self.policy_file.write_text(text)


@pytest.fixture
def site(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> Site:
    if os.geteuid() != 0:
        unavailable("a site policy is root's: its test creates root's files (CI runs as root)")
    root = tmp_path / "ws"
    root.mkdir(mode=0o700)
    (tmp_path / "slurm-image.toml").write_text(
        f'workspace_root = "{root}"\n'
        "[image_build]\n"
        'partition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
        '[submitter]\nkind = "fake"\n'
    )
    etc = tmp_path / "etc"
    etc.mkdir(mode=0o755)
    etc.chmod(0o755)
    key_file = etc / "site.pub"
    key_file.write_bytes(public_pem(ec.generate_private_key(ec.SECP256R1())))
    key_file.chmod(0o644)
    registry = MemoryRegistry()
    registry.host(REGISTRY)
    scheduler = fake_scheduler(tmp_path, monkeypatch)
    built = api.build_container

    def build(profile: Any = None) -> Any:
        container = built(profile)
        container.registry.override(providers.Object(registry))
        return container

    monkeypatch.setattr(api, "build_container", build)
    monkeypatch.setattr(site_policy, "SITE_POLICY_PATH", str(etc / "policy.toml"))
    made = Site(root, capsys, scheduler)
    made.policy_file, made.key_file = etc / "policy.toml", key_file
    return made


def test_overrides_cannot_switch_off_the_sites_required_signature(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.site_policy(f'[policy]\nrequire_signature = true\nkeys = ["{site.key_file}"]\n')
    site.policy_file.chmod(0o644)
    monkeypatch.setenv("SLURM_IMAGE_POLICY__REQUIRE_SIGNATURE", "false")
    monkeypatch.setenv("SLURM_IMAGE_POLICY__KEYS", "[]")
    code, out, err = site.run(*IMPORT)
    assert code == 10, err
    assert err.startswith(f"slurm-image: error: sha256:{'5' * 64}: is not signed")
    assert out == ""
    assert site.staged() == []


def test_another_profile_and_overrides_cannot_widen_the_sites_registries(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.site_policy(f'[policy]\nallowed_registries = ["{REGISTRY}/team"]\n')
    mine = tmp_path / "mine.toml"
    mine.write_text((tmp_path / "slurm-image.toml").read_text())  # no [policy] at all
    code, _, err = site.run("--profile", str(mine), "import", ELSEWHERE, "--name", "u",
                            "--role", "client", "--dry-run")  # fmt: skip
    assert code == 2
    assert err == (
        f"slurm-image: error: source: is outside policy.allowed_registries ({REGISTRY}/team):"
        " the registry and the start of the repository path must be one of them, whole path"
        " components only\n"
    )
    monkeypatch.setenv("SLURM_IMAGE_POLICY__ALLOWED_REGISTRIES", '["docker.io"]')
    code, _, err = site.run("import", ELSEWHERE, "--name", "u", "--role", "client", "--dry-run")
    assert code == 2
    assert err.startswith(
        f"slurm-image: error: policy.allowed_registries: allows nothing the site policy allows"
        f" ({REGISTRY}/team): a profile can narrow the site's registries, never widen them"
        f" (site policy {site.policy_file})"
    )
    assert site.staged() == []


def test_the_plan_records_the_merged_policy_and_the_site_files_sha256(site: Site) -> None:
    text = f'[policy]\nallowed_registries = ["{REGISTRY}"]\n'
    site.site_policy(text)
    plan = site.json(*IMPORT)["plan"]
    assert plan["schema_version"] == 6
    assert plan["profile_selection"]["site_policy_sha256"] == (
        hashlib.sha256(text.encode()).hexdigest()
    )
    assert plan["profile"]["policy"]["allowed_registries"] == [REGISTRY]
    os.unlink(site.policy_file)  # no site policy: the plan of before, version 2
    plan = site.json(*IMPORT)["plan"]
    assert plan["schema_version"] == 2
    assert "site_policy_sha256" not in plan["profile_selection"]
    assert "policy" not in plan["profile"]


@pytest.mark.parametrize("mode", [0o664, 0o666])
def test_a_site_policy_others_could_change_stops_every_command_that_reads_the_profile(
    site: Site, mode: int
) -> None:
    site.site_policy(f'[policy]\nallowed_registries = ["{REGISTRY}"]\n')
    site.policy_file.chmod(mode)
    refusal = (
        f"{site.policy_file}: {site.policy_file} is writable by group or others: the site policy"
        " and every directory on its way must be changeable by root alone"
    )
    for command in (IMPORT, ("gc", "--dry-run"), ("metrics", "--json")):
        code, _, err = site.run(*command)
        assert code == 2, (command, err)
        assert err == f"slurm-image: error: {refusal}\n", command
    code, out, _ = site.run("doctor", "--json")
    assert code == 2
    (profile_check,) = (check for check in json.loads(out)["checks"] if check["name"] == "profile")
    assert (profile_check["ok"], profile_check["detail"]) == (False, refusal)
    assert site.staged() == []
