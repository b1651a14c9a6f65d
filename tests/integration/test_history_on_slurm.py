"""On the local Slurm 22.05 cluster, through the CLI: an import, a --replace by another image, a
job the verifying curl refuses (a lying registry, exit 79), an unregister and a gc are each in
the store's history, in order, with who, when and what (docs/design.md, "History").

One cluster only: what the history records does not depend on the scheduler's release, and the
other clusters run the same lifecycle in the rest of the suite."""

from __future__ import annotations

import json
import os
import platform
import pwd
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "execution"))

import test_verified_chain_on_slurm as chain
from harness import registry_images  # noqa: F401  (the fixture, registered by import)

from clusters import Cluster, cluster
from lying_registry import Answer, LyingRegistry

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

ARCH = platform.machine()


@pytest.fixture(scope="module", params=["22.05"], ids=["slurm-22.05"])
def local_slurm(request: pytest.FixtureRequest) -> Cluster:
    """Slurm 22.05 alone (see the module docstring)."""
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

    assert site.json("unregister", "app") == {"name": "app"}
    removed = site.json("gc", "--older-than", "0s")["removed"]

    history = site.json("history")
    events = history["events"]
    assert history["skipped"] == 0
    assert [e["event"] for e in events] == [
        "published",
        "replaced",
        "job_failed",
        "unregistered",
        "gc_artifact",
        "gc_artifact",
        "gc_attempt",
        "gc_attempt",
        "gc_attempt",
    ]
    me = pwd.getpwuid(os.getuid()).pw_name
    for event in events:
        assert (event["user"], event["uid"], event["host"]) == (
            me,
            os.getuid(),
            socket.gethostname(),
        )
        assert event["schema_version"] == 1 and event["time"].endswith("Z")
    times = [datetime.fromisoformat(e["time"]) for e in events]
    assert times == sorted(times)

    published, rebound, job_failed, unregistered = events[:4]
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
    gone = {e["artifact"] for e in events[4:6]}
    assert gone == {first["sqsh_sha256"], second["sqsh_sha256"]}
    assert gone == {
        Path(r["path"]).name.removesuffix(".sqsh") for r in removed if r["kind"] == "artifact"
    }
    attempts = {e["lifecycle_id"]: e for e in events[6:]}
    assert set(attempts) == {first["lifecycle_id"], second["lifecycle_id"], failed_id}
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
