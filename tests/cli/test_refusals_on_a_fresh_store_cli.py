"""A store's history holds from its first request (docs/design.md, "History"): on a new, empty
workspace root, the first request a rule refuses is in ``history`` with its rule and counted by
``metrics``, and what the history needs is laid out with the store's usual modes: a refusal of
the allowlist (no network), a source without a signature under ``require_signature`` and a
registry whose ``Docker-Content-Digest`` lies (both a registry served here over TLS). A
workspace root that is missing, or mounted read-only, costs the refusal one warning.

The profile names no default architecture, as a site's often does: nothing before the refusal
(an import's lock) lays out the store. The command line runs in this process with the fake
scheduler, but for the read-only mount (a fresh process in a private mount namespace)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from cli_site import CliSite, fake_scheduler
from cosign_artifacts import public_pem
from metrics_support import samples, series
from scripted_registry import ScriptedRegistry, digest_of, manifest_bytes
from slurm_image.domain.store_layout import StoreLayout
from support import run_cli, unavailable
from tls_material import TlsMaterial, make_tls_material

REPOSITORY = "team/app"
DATA = manifest_bytes("first request")
OUTSIDE = "registry.example.org/team/app:1"
ALLOWLIST = '[policy]\nallowed_registries = ["registry.site.example"]\n'


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("fresh-store-tls"))


@pytest.fixture
def registry(tls: TlsMaterial) -> Any:
    served = ScriptedRegistry("127.0.0.1", tls.server_context())
    served.put(REPOSITORY, "1", DATA)
    yield served
    served.close()


class Site(CliSite):
    def __init__(self, base: Path, capsys: Any, scheduler: Any) -> None:
        super().__init__(base / "ws", capsys, scheduler)
        self.base = base
        self.layout = StoreLayout(str(self.root))

    def with_policy(self, policy: str) -> None:
        (self.base / "slurm-image.toml").write_text(profile_text(self.root) + policy)

    def refused_first(self, *args: str) -> tuple[int, str]:
        """``import ARGS`` as the workspace's first request: its exit code and its one line."""
        assert list(self.root.iterdir()) == []
        code, out, err = self.run("import", *args, "--name", "app", "--role", "client")
        assert out == ""
        assert len(err.splitlines()) == 1 and err.startswith("slurm-image: error: "), err
        return code, err.removeprefix("slurm-image: error: ").strip()

    def only_refusal(self) -> dict[str, Any]:
        found = self.json("history")
        assert found["skipped"] == 0
        (event,) = found["events"]
        assert event["event"] == "refused"
        return dict(event)

    def counted(self, rule: str) -> tuple[int, float]:
        """The refusals of ``rule`` as ``metrics --json`` and its text say."""
        figures = self.json("metrics")["refusals"][rule]
        code, text, err = self.run("metrics")
        assert code == 0, err
        return figures, samples(text)[series("refusals_total", rule=rule)]

    def modes(self) -> dict[str, tuple[int, int]]:
        """Mode and owner of each directory the history needs, and of its month file."""
        (month,) = os.listdir(self.layout.history)
        paths = {
            "images": self.layout.images,
            "history": self.layout.history,
            "locks": self.layout.locks,
            "month": f"{self.layout.history}/{month}",
        }
        return {name: mode_and_owner(path) for name, path in paths.items()}


def mode_and_owner(path: str) -> tuple[int, int]:
    status = os.lstat(path)
    return status.st_mode & 0o7777, status.st_uid


def profile_text(root: Path) -> str:
    return (
        f'workspace_root = "{root}"\n'
        "[image_build]\n"
        'partition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
        '[submitter]\nkind = "fake"\n'
    )


@pytest.fixture
def site(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, tls: TlsMaterial) -> Site:
    (tmp_path / "ws").mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_file))
    built = Site(tmp_path, capsys, fake_scheduler(tmp_path, monkeypatch))
    built.with_policy("")
    return built


USUAL = {
    "images": (0o755, os.geteuid()),
    "history": (0o755, os.geteuid()),
    "locks": (0o700, os.geteuid()),
    "month": (0o644, os.geteuid()),
}
"""What a store's history lives in once anything was published in it."""


@pytest.mark.parametrize(
    "asked",
    [[f"{OUTSIDE}@sha256:{'5' * 64}"], [OUTSIDE, "--resolve"]],
    ids=["pin", "tag"],
)
def test_the_first_request_outside_the_allowlist_is_recorded_and_counted(
    site: Site, asked: list[str]
) -> None:
    site.with_policy(ALLOWLIST)
    code, reason = site.refused_first(*asked)
    assert code == 2 and "policy.allowed_registries" in reason
    refused = site.only_refusal()
    assert (refused["rule"], refused["exit_code"], refused["alias"]) == (
        "source_not_allowed",
        2,
        "app",
    )
    assert (refused["source"], refused["reason"]) == (asked[0], reason)
    assert site.counted("source_not_allowed") == (1, 1.0)
    assert site.modes() == USUAL


def test_the_first_request_for_an_unsigned_image_is_recorded_and_counted(
    site: Site, registry: ScriptedRegistry
) -> None:
    key = site.base / "site.pub"
    key.write_bytes(public_pem(ec.generate_private_key(ec.SECP256R1())))
    site.with_policy(f'[policy]\nrequire_signature = true\nkeys = ["{key}"]\n')
    pin = f"{registry.address}/{REPOSITORY}:1@{digest_of(DATA)}"
    code, reason = site.refused_first(pin)
    assert code == 10 and reason.endswith("is not signed (no cosign signature found)")
    refused = site.only_refusal()
    assert (refused["rule"], refused["exit_code"], refused["source"]) == (
        "signature_missing",
        10,
        pin,
    )
    assert site.counted("signature_missing") == (1, 1.0)
    assert site.modes() == USUAL


def test_the_first_tag_a_lying_registry_resolves_is_recorded_and_counted(
    site: Site, registry: ScriptedRegistry
) -> None:
    registry.script(REPOSITORY, "1", content_digest=digest_of(b"other bytes"))
    tag = f"{registry.address}/{REPOSITORY}:1"
    code, reason = site.refused_first(tag, "--resolve")
    assert code == 8 and "disagrees with the bytes it sent" in reason
    refused = site.only_refusal()
    assert (refused["rule"], refused["exit_code"], refused["source"]) == (
        "registry_digest_mismatch",
        8,
        tag,
    )
    assert site.counted("registry_digest_mismatch") == (1, 1.0)
    assert site.modes() == USUAL


def test_a_store_a_refusal_laid_out_stages_the_next_request(site: Site) -> None:
    site.with_policy(ALLOWLIST)
    site.refused_first(f"{OUTSIDE}@sha256:{'5' * 64}")
    site.with_policy("")
    staged = site.json(
        "import", f"{OUTSIDE}@sha256:{'5' * 64}", "--name", "app", "--role", "client"
    )
    assert Path(site.layout.jobs, staged["lifecycle_id"]).is_dir()
    assert [e["event"] for e in site.json("history")["events"]] == ["refused"]


def test_a_missing_workspace_root_costs_the_refusal_one_warning(site: Site) -> None:
    site.root.rmdir()
    site.with_policy(ALLOWLIST)
    code, out, err = site.run("import", OUTSIDE, "--resolve", "--name", "app", "--role", "client")
    assert (code, out) == (2, "")
    warning, error = err.splitlines()
    assert "the store's history misses this refused event (app)" in warning
    assert f"{site.root}: does not exist" in warning
    assert error.startswith("slurm-image: error: source: is outside policy.allowed_registries")
    assert not site.root.exists()


def test_a_read_only_workspace_costs_the_refusal_one_warning(site: Site) -> None:
    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare or "unshare", "-m", "true"], capture_output=True, check=False)
    if unshare is None or probe.returncode != 0:
        unavailable("unshare -m is not permitted here")
    site.with_policy(ALLOWLIST)
    read_only = (
        unshare,
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        f'mount --bind -o ro "{site.root}" "{site.root}" && exec "$@"',
        "sh",
    )
    done = run_cli(
        "import", OUTSIDE, "--resolve", "--name", "app", "--role", "client",
        cwd=site.base, prefix=read_only,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    warning, error = done.stderr.splitlines()
    assert "the store's history misses this refused event (app)" in warning
    assert "Read-only file system" in warning
    assert error.startswith("slurm-image: error: source: is outside policy.allowed_registries")
    assert list(site.root.iterdir()) == []
