"""``resolve``, ``import --resolve`` and ``outdated`` through the CLI's own entry point in this
process, with the in-memory registry in place of the HTTP one and the fake scheduler: what each
prints, its exit codes (2 bad input or no such tag, 3 credentials refused, 8 an answer refused,
9 a tag moved), and that nothing is staged before the tag resolved."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers

import slurm_image.composition.api as api
from cli_site import CliSite, fake_scheduler
from scripted_registry import LIST_V2, index_bytes, manifest_bytes
from slurm_image.adapters.memory import FakeSubmitter, MemoryRegistry
from slurm_image.domain.paths import AttemptLayout

REGISTRY = "registry.example.org"
TAG = f"{REGISTRY}/team/app:1"
AMD64, ARM64 = manifest_bytes("app", "amd64"), manifest_bytes("app", "arm64")
INDEX = index_bytes([("amd64", AMD64), ("arm64", ARM64)])


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Site(CliSite):
    def __init__(
        self, root: Path, capsys: Any, scheduler: FakeSubmitter, registry: MemoryRegistry
    ) -> None:
        super().__init__(root, capsys, scheduler)
        self.registry = registry

    def staged(self) -> list[Path]:
        jobs = self.root / "images" / ".tmp" / "jobs"
        return sorted(jobs.iterdir()) if jobs.is_dir() else []

    def published_import(self, name: str, arch: str = "x86_64") -> dict[str, Any]:
        return self.publish_resolved(TAG, name, sha256(AMD64 if arch == "x86_64" else ARM64), arch)


@pytest.fixture
def site(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> Site:
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
    netrc.write_text(f"machine {REGISTRY} login alice password canary-cli-0a9b8c\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    registry = MemoryRegistry()
    registry.host(REGISTRY, accounts={"alice": "canary-cli-0a9b8c"})
    registry.put(REGISTRY, "team/app", "1", INDEX, LIST_V2)
    scheduler = fake_scheduler(tmp_path, monkeypatch)
    built = api.build_container

    def build(profile: Any = None) -> Any:
        container = built(profile)
        container.registry.override(providers.Object(registry))
        return container

    monkeypatch.setattr(api, "build_container", build)
    return Site(root, capsys, scheduler, registry)


def test_resolve_prints_the_pin_first_and_the_manifest_of_the_architecture(site: Site) -> None:
    code, out, err = site.run("resolve", TAG, "--arch", "aarch64")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"{TAG}@{sha256(INDEX)}"
    assert f"aarch64: {sha256(ARM64)}" in lines
    assert any("linux/arm64" in line and sha256(ARM64) in line for line in lines)
    assert site.run("--quiet", "resolve", TAG)[1] == f"{TAG}@{sha256(INDEX)}\n"
    answer = site.json("resolve", TAG, "--arch", "x86_64")
    assert (answer["digest"], answer["manifest"], answer["index"]) == (
        sha256(INDEX),
        sha256(AMD64),
        True,
    )
    assert site.staged() == []


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        ((f"{TAG}@sha256:{'a' * 64}",), 2, "no digest"),
        ((f"{REGISTRY}/team/app",), 2, "a tag is required"),
        ((f"{REGISTRY}/team/app:2",), 2, "has no team/app:2"),
        ((TAG, "--arch", "ppc64le"), 2, "linux/amd64, linux/arm64"),
        ((TAG, "--arch", "arm64"), 2, "use 'aarch64'"),
    ],
)
def test_resolve_refusals_are_one_line_with_their_exit_code(
    site: Site, args: tuple[str, ...], code: int, words: str
) -> None:
    exit_code, out, err = site.run("resolve", *args)
    assert (exit_code, out) == (code, "")
    assert words in err and len(err.strip().splitlines()) == 1


def test_a_lying_digest_header_exits_8_and_import_stages_nothing(site: Site) -> None:
    site.registry.put(REGISTRY, "team/app", "1", INDEX, LIST_V2, content_digest=sha256(b"x"))
    code, _, err = site.run("resolve", TAG)
    assert code == 8 and "disagrees with the bytes" in err
    code, _, err = site.run("import", TAG, "--resolve", "--name", "app", "--role", "client")
    assert code == 8, err
    assert site.staged() == [] and site.scheduler.jobs == {}


def test_refused_credentials_exit_3_naming_the_registry_and_the_entry(site: Site) -> None:
    host = site.registry.hosts[REGISTRY]
    host.auth, host.accounts = "basic", {"alice": "another-password"}
    code, out, err = site.run("resolve", TAG)
    assert code == 3 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert REGISTRY in err and f"machine {REGISTRY} login alice" in err
    assert "canary-cli-0a9b8c" not in err


def test_import_resolve_dry_run_plans_the_pin_and_records_the_tag(site: Site) -> None:
    planned = site.json("import", TAG, "--resolve", "--name", "app", "--role", "client",
                        "--arch", "aarch64", "--dry-run")  # fmt: skip
    plan = planned["plan"]
    assert plan["schema_version"] == 3
    assert plan["request"]["source"] == f"{TAG}@{sha256(INDEX)}"
    assert plan["source_digest"] == sha256(INDEX)
    resolved = plan["request"]["resolved_from"]
    assert (resolved["tag"], resolved["digest"]) == (TAG, sha256(INDEX))
    assert site.staged() == []


def test_import_resolve_submits_the_pin_and_its_plan_records_the_tag(site: Site) -> None:
    submitted = site.json("import", TAG, "--resolve", "--name", "app", "--role", "client")
    plan = json.loads(
        Path(AttemptLayout(str(site.root), submitted["lifecycle_id"]).plan).read_text()
    )
    assert plan["request"]["resolved_from"]["tag"] == TAG
    assert plan["enroot_uri"] == f"docker://{REGISTRY}#team/app:1@{sha256(INDEX)}"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((f"{TAG}@sha256:{'a' * 64}", "--resolve"), "no digest"),
        ((TAG, "--resolve", "--name", "-x"), "name"),
        ((TAG,), "--resolve"),
    ],
)
def test_import_refuses_before_any_registry_is_asked(
    site: Site, args: tuple[str, ...], words: str
) -> None:
    site.registry.hosts.clear()  # a request would fail as unreachable (exit 3), not 2
    arguments = list(args)
    if "--name" not in arguments:
        arguments += ["--name", "app"]
    code, _, err = site.run("import", *arguments, "--role", "client")
    assert code == 2 and words in err
    assert site.staged() == []


def test_inspect_takes_no_resolve(site: Site) -> None:
    code, _, err = site.run(
        "inspect", "/tmp/x.sqsh", "--resolve", "--name", "a", "--role", "client"
    )
    assert code == 2 and "--resolve" in err


def test_show_and_list_print_the_tag_and_outdated_exits_9_once_it_moved(site: Site) -> None:
    site.published_import("app")
    shown = site.json("show", "app", "--arch", "x86_64")
    assert shown["resolved_from"]["tag"] == TAG
    code, human, _ = site.run("show", "app", "--arch", "x86_64")
    assert code == 0 and f"tag           {TAG} (resolved" in human
    assert site.json("list")["images"][0]["resolved_from"]["digest"] == sha256(INDEX)

    code, out, err = site.run("outdated")
    assert code == 0, err
    assert "app" in out and "current" in out

    moved = index_bytes([("amd64", manifest_bytes("app v2")), ("arm64", ARM64)])
    site.registry.put(REGISTRY, "team/app", "1", moved, LIST_V2)
    code, out, err = site.run("outdated", "--json")
    assert code == 9, err
    (entry,) = json.loads(out)["images"]
    assert (entry["name"], entry["state"]) == ("app", "moved")
    assert entry["new_pin"] == f"{TAG}@{sha256(moved)}"
    assert f"import {TAG}@{sha256(moved)} --name app --role client --arch x86_64" in err
    assert site.run("--quiet", "outdated")[1] == "app\n"


def test_outdated_exits_with_the_registrys_code_when_a_tag_cannot_be_checked(site: Site) -> None:
    site.published_import("app")
    site.registry.hosts.clear()
    code, out, err = site.run("outdated", "app")
    assert code == 3
    assert "failed" in out and "could not be checked" in err
    code, _, err = site.run("outdated", "nosuch")
    assert code == 2 and "no alias nosuch" in err


def test_the_registry_timeout_the_cli_writes_out_is_the_use_cases_default() -> None:
    from slurm_image.application.resolve import DEFAULT_TIMEOUT_S
    from slurm_image.cli import tag_commands

    assert tag_commands.RESOLVE_TIMEOUT_S == api.RESOLVE_TIMEOUT_S == DEFAULT_TIMEOUT_S
