"""On the local Slurm 26.05 cluster, through the CLI: an import, a --replace by another image, an
unsigned import the site's policy refuses, a job the verifying curl refuses (a lying registry,
exit 79), a job cancelled with scancel past the product, an unregister and a gc are each in the
store's history, in order, with who, when and what (docs/design.md, "History"); a published
import's event carries how long its job ran by Slurm's own count, and metrics count the
refusal by its rule and the ends of the jobs by their state.

One cluster only: what the history records does not depend on the scheduler's release, and the
other clusters run the same lifecycle in the rest of the suite. It is 26.05, whose worker has
room for it beside 22.05's, which carries the quick suite's single-cluster tests."""

from __future__ import annotations

import json
import os
import platform
import pwd
import re
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "execution"))

import test_verified_chain_on_slurm as chain
from harness import registry_images  # noqa: F401  (the fixture, registered by import)

from clusters import Cluster, cluster
from cosign_artifacts import public_pem
from lying_registry import Answer, LyingRegistry
from metrics_support import samples, series
from support import run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.e2e, pytest.mark.full_only]

ARCH = platform.machine()


@pytest.fixture(scope="module", params=["26.05"], ids=["slurm-26.05"])
def local_slurm(request: pytest.FixtureRequest) -> Cluster:
    """Slurm 26.05 alone (see the module docstring)."""
    return cluster(str(request.param))


images = chain.images  # the fixtures of the local registry's images and of the lying one
registry = chain.registry


class Site(chain.Site):
    """The verified-chain test's site, whose commands must record every event they change."""

    def json(self, *args: str) -> dict[str, Any]:
        done = self.run(*args)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "history misses" not in done.stderr, done.stderr
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    def import_as(
        self, source: str, name: str, role: str, *more: str
    ) -> subprocess.CompletedProcess[str]:
        return self.run(
            "import", source, "--name", name, "--role", role, "--arch", ARCH, "--wait",
            "--timeout", "800", *more,
        )  # fmt: skip

    def strict_profile(self) -> Path:
        """This site's profile with a policy that requires a signature by a key of its own,
        which signed nothing in the local registry."""
        key = self.base / "site.pub"
        key.write_bytes(public_pem(ec.generate_private_key(ec.SECP256R1())))
        key.chmod(0o644)
        strict = self.base / "strict.toml"
        strict.write_text(
            (self.base / "slurm-image.toml").read_text()
            + f'[policy]\nrequire_signature = true\nkeys = ["{key}"]\n'
        )
        return strict

    def until_terminal(self, lifecycle_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + 120
        while True:
            (status,) = self.json("status", lifecycle_id)["lifecycles"]
            if (
                status["state"] in ("CANCELLED", "COMPLETED", "FAILED")
                or time.monotonic() > deadline
            ):
                return dict(status)
            time.sleep(0.5)


def run_seconds(text: str) -> int:
    """Slurm's RunTime (``[D-]HH:MM:SS``) in seconds."""
    days, _, clock = text.rpartition("-")
    hours, minutes, seconds = (int(part) for part in re.split(":", clock))
    return int(days or 0) * 86400 + hours * 3600 + minutes * 60 + seconds


def test_each_change_of_the_store_is_in_its_history_in_order(
    world_readable_tmp: Path, local_slurm: Cluster, registry: LyingRegistry, images: dict[str, str]
) -> None:
    site = Site(world_readable_tmp, local_slurm)
    assert site.json("history") == {"events": [], "skipped": 0}

    imported = site.import_as(images["client"], "app", "client")
    assert imported.returncode == 0, imported.stderr
    first = json.loads(imported.stdout)
    replaced = site.import_as(images["serving"], "app", "serving", "--replace")
    assert replaced.returncode == 0, replaced.stderr
    second = json.loads(replaced.stdout)

    unsigned = site.run(
        "--profile", str(site.strict_profile()), "import", images["nopython"], "--name",
        "unsigned", "--role", "client", "--arch", ARCH,
    )  # fmt: skip
    assert unsigned.returncode == 10, unsigned.stdout + unsigned.stderr
    assert "is not signed" in unsigned.stderr

    genuine = images["client"]
    pin = genuine.rsplit("@", 1)[1]
    other = registry.manifest("slurm-image-test/nopython", images["nopython"].rsplit("@", 1)[1])
    registry.answer(Answer(f"/v2/slurm-image-test/client/manifests/{pin}", other))
    lied = site.import_as(  # --force: the store holds this pin already, and would answer
        f"{registry.address}/slurm-image-test/client:1@{pin}", "lied", "client", "--force"
    )
    assert lied.returncode == 4, lied.stdout + lied.stderr
    assert "FAILED exit 79" in lied.stderr
    attempts_dir = site.workspace / "images" / ".tmp" / "jobs"
    (failed_id,) = {p.name for p in attempts_dir.iterdir()} - {
        first["lifecycle_id"],
        second["lifecycle_id"],
    }
    (failed,) = site.json("status", failed_id)["lifecycles"]
    site.json("status", failed_id)  # observed again: recorded once

    stopped = site.json(  # submitted, then cancelled with scancel: the product takes no part
        "import", images["client"], "--name", "stopped", "--role", "client", "--arch", ARCH,
        "--force",
    )  # fmt: skip
    local_slurm.command("scancel", stopped["job_id"])
    cancelled = site.until_terminal(stopped["lifecycle_id"])
    assert cancelled["state"] == "CANCELLED"
    site.json("status", stopped["lifecycle_id"])  # observed again: recorded once

    figures = site.json("metrics")
    assert figures["refusals"]["signature_missing"] == 1
    assert sum(figures["refusals"].values()) == 1
    assert {"operation": "import", "exit_code": 79, "state": "FAILED", "count": 1} in figures[
        "job_failures"
    ]
    assert {"operation": "import", "outcome": "cancelled", "count": 1} in figures["lifecycles"]
    runs = {(r["operation"], r["outcome"]): r for r in figures["job_run_seconds"]}
    assert runs[("import", "published")]["count"] == 2  # the run-time histogram has its samples
    text = run_cli("metrics", cwd=site.base, env=site.env, inherit=False, timeout=120)
    assert text.returncode == 0, text.stderr
    found = samples(text.stdout)
    assert found[series("refusals_total", rule="signature_missing")] == 1
    assert found[series("job_failures_total", operation="import", exit_code=79, state="FAILED")]
    assert found[series("job_run_seconds_count", operation="import", outcome="published")] == 2

    assert site.json("unregister", "app") == {"name": "app"}
    with (site.base / "slurm-image.toml").open("a") as profile:
        profile.write('[store]\nrelease_grace = "0s"\n')  # no grace: gc takes both artifacts
    removed = site.json("gc", "--older-than", "0s")["removed"]

    history = site.json("history")
    events = history["events"]
    assert history["skipped"] == 0
    assert [e["event"] for e in events] == [
        "published",
        "replaced",
        "refused",
        "job_failed",
        "cancelled",
        "unregistered",
        "gc_artifact",
        "gc_artifact",
        "gc_attempt",
        "gc_attempt",
        "gc_attempt",
        "gc_attempt",
        "gc_removed",  # the source records
        "gc_removed",  # the layer cache's blobs: all used before now
    ]
    me = pwd.getpwuid(os.getuid()).pw_name
    for event in events:
        assert (event["user"], event["uid"], event["host"]) == (
            me,
            os.getuid(),
            socket.gethostname(),
        )
        assert event["schema_version"] == 3 and event["time"].endswith("Z")
    times = [datetime.fromisoformat(e["time"]) for e in events]
    assert times == sorted(times)

    published, rebound, refused, job_failed, scancelled, unregistered = events[:6]
    assert published | {"time": None} == published | {
        "time": None,
        "lifecycle_id": first["lifecycle_id"],
        "job_id": first["job_id"],
        "alias": "app",
        "architecture": ARCH,
        "operation": "import",
        "role": "client",
        "source_digest": first["source_digest"],
        "artifact": first["sqsh_sha256"],
        "previous_artifact": None,
        "exit_code": None,
    }
    assert published["publish_latency_seconds"] >= 0
    for event, result in ((published, first), (rebound, second)):  # Slurm's own count of the job
        slurm = run_seconds(local_slurm.show_job(result["job_id"])["RunTime"])
        assert abs(event["job_seconds"] - slurm) <= 2, (event["job_seconds"], slurm)
    assert first["job"]["job_id"] == first["job_id"] and first["job"]["ended_at"] is not None
    assert (refused["rule"], refused["exit_code"], refused["alias"]) == (
        "signature_missing",
        10,
        "unsigned",
    )
    assert refused["source"] == images["nopython"] and refused["lifecycle_id"] is None
    assert (scancelled["lifecycle_id"], scancelled["job_id"], scancelled["state"]) == (
        stopped["lifecycle_id"],
        stopped["job_id"],
        "CANCELLED",
    )
    assert (rebound["lifecycle_id"], rebound["job_id"], rebound["role"]) == (
        second["lifecycle_id"],
        second["job_id"],
        "serving",
    )
    assert (rebound["artifact"], rebound["previous_artifact"]) == (
        second["sqsh_sha256"],
        first["sqsh_sha256"],
    )
    assert (job_failed["lifecycle_id"], job_failed["job_id"], job_failed["alias"]) == (
        failed_id,
        failed["job_id"],
        "lied",
    )
    assert (job_failed["exit_code"], job_failed["state"], job_failed["operation"]) == (
        79,
        "FAILED",
        "import",
    )
    assert job_failed["source_digest"] == pin and job_failed["artifact"] is None
    assert (unregistered["alias"], unregistered["architecture"], unregistered["artifact"]) == (
        "app",
        ARCH,
        second["sqsh_sha256"],
    )
    gone = {e["artifact"] for e in events[6:8]}
    assert gone == {first["sqsh_sha256"], second["sqsh_sha256"]}
    assert gone == {
        Path(r["path"]).name.removesuffix(".sqsh") for r in removed if r["kind"] == "artifact"
    }
    attempts = {e["lifecycle_id"]: e for e in events[8:12]}
    assert set(attempts) == {
        first["lifecycle_id"],
        second["lifecycle_id"],
        failed_id,
        stopped["lifecycle_id"],
    }
    counted = {e["removed"]: (e["count"], e["bytes"]) for e in events[12:]}
    assert counted["source"][0] == 2
    layers = [r for r in removed if r["kind"] == "layer"]
    assert counted["layer"] == (len(layers), sum(r["bytes"] for r in layers)) and layers
    assert attempts[failed_id]["alias"] == "lied"
    assert attempts[failed_id]["job_id"] == failed["job_id"]

    assert [e["event"] for e in site.json("history", "app")["events"]] == [
        "published",
        "replaced",
        "unregistered",
        "gc_attempt",  # the attempts of app's two lifecycles
        "gc_attempt",
    ]
    assert site.json("history", "--since", "2999-01-01")["events"] == []
    month = times[0].strftime("%Y-%m")
    history_file = site.workspace / "images" / "history" / f"{month}.jsonl"
    assert oct(history_file.stat().st_mode & 0o777) == "0o644"
    assert oct(history_file.parent.stat().st_mode & 0o777) == "0o755"
