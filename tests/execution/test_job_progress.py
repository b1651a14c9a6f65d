"""The job's progress record under bash with the stand-in (docs/design.md, "Progress"): the
phases it passes, the download's counters as the verifying curl counts them, and the phase a
failing job ends in, with its exit code."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from harness import HTTP, Job, JobFactory, Standin

from lying_registry import CLIENT, NOPYTHON, Answer, lying_registry, pinned
from slurm_image.domain import job_steps
from slurm_image.domain.progress import load_progress
from slurm_image.domain.script import verifying_curl


def snapshot(standin: Standin, job: Job, *hooks: str) -> Path:
    """Each hook appends the progress record as it is then to a log, one line per hook."""
    log = job.tmp / "progress-seen.jsonl"
    record = job.job_dir / "progress.json"
    standin.configure(hooks={hook: f"cat {record} >>{log}" for hook in hooks})
    return log


def seen(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def final(job: Job) -> dict[str, Any]:
    data = (job.job_dir / "progress.json").read_bytes()
    load_progress(data)  # the model reads what the job writes
    document: dict[str, Any] = json.loads(data)
    return document


@pytest.mark.e2e
def test_an_import_records_download_extract_squash_inspect_then_done(
    make_job: JobFactory, standin: Standin, registry_images: dict[str, str]
) -> None:
    job = make_job(
        operation="import_oci", role="client", source=registry_images["client"], environment=HTTP
    )
    log = snapshot(standin, job, "import_downloaded", "import_extracted", "import", "create")

    result = job.run()

    assert result.returncode == 0, result.stderr
    records = seen(log)
    assert len(records) == 4, records
    download, extract, squash, inspect = records
    assert download["phase"] == "download"
    assert download["layers_total"] >= 1
    assert download["layers_done"] == download["layers_total"]
    assert download["bytes_done"] == download["bytes_total"] > 0
    assert extract["phase"] == "extract"
    assert squash["phase"] == "squash"
    assert inspect["phase"] == "inspect"
    assert inspect["updated_at"] >= download["updated_at"]
    end = final(job)
    assert (end["phase"], end["ended"], end["exit_code"]) == ("done", "done", 0)
    assert not list(job.job_dir.glob("progress.json.*"))  # no temporary file left


def test_an_inspect_records_hash_bytes_of_the_image_then_inspect(
    make_job: JobFactory, standin: Standin, image: Any
) -> None:
    source = image("report")
    job = make_job(operation="inspect_sqsh", role="client", source=str(source))
    log = snapshot(standin, job, "create_before", "create")

    assert job.run().returncode == 0
    create, start = seen(log)
    assert create["phase"] == start["phase"] == "inspect"
    assert final(job)["phase"] == "done"
    # hashing started from byte 0 of the image's size: the record it wrote first
    assert "bytes_total" not in create


def test_an_import_failing_while_squashing_keeps_that_phase_and_its_exit_code(
    make_job: JobFactory, standin: Standin, registry_images: dict[str, str]
) -> None:
    job = make_job(
        operation="import_oci", role="client", source=registry_images["client"], environment=HTTP
    )
    standin.configure(fail={"import": 3})

    result = job.run()

    assert result.returncode == 3, result.stderr
    end = final(job)
    assert (end["phase"], end["ended"], end["exit_code"]) == ("squash", "failed", 3)


def test_a_failed_create_leaves_phase_inspect_with_the_job_exit_code(
    make_job: JobFactory, standin: Standin, image: Any
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    standin.configure(fail={"create": 5})

    result = job.run()

    assert result.returncode != 0
    end = final(job)
    assert (end["phase"], end["ended"], end["exit_code"]) == (
        "inspect",
        "failed",
        result.returncode,
    )


def test_a_job_refused_before_its_directories_are_checked_writes_no_record(
    make_job: JobFactory, standin: Standin, image: Any
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    result = job.run(env={"SLURM_RESTART_COUNT": "1"})

    assert result.returncode == 75
    assert not (job.job_dir / "progress.json").exists()


def test_a_staged_file_mismatch_ends_in_phase_checks(
    make_job: JobFactory, standin: Standin, image: Any
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    Path(job.paths.rc).chmod(0o700)
    Path(job.paths.rc).write_text("# changed\n")

    result = job.run()

    assert result.returncode == 70
    end = final(job)
    assert (end["phase"], end["ended"], end["exit_code"]) == ("checks", "failed", 70)


@pytest.mark.e2e
def test_an_import_refused_by_the_verifying_curl_ends_in_download_with_79(
    make_job: JobFactory, registry_images: dict[str, str]
) -> None:
    with lying_registry() as registry:
        pin = pinned(registry_images, "nopython")
        other = registry.manifest(CLIENT, pinned(registry_images, "client"))
        registry.answer(Answer(f"/v2/{NOPYTHON}/manifests/{pin}", other))
        job = make_job(
            operation="import_oci",
            role="client",
            source=f"{registry.address}/{NOPYTHON}:1@{pin}",
            environment=HTTP,
        )
        result = job.run()

    assert result.returncode == 79, result.stderr
    end = final(job)
    assert (end["phase"], end["ended"], end["exit_code"]) == ("download", "failed", 79)
    assert "layers_total" not in end  # no manifest was verified: no layers to count


HASH_WATCH = """
set -euo pipefail
PROGRESS=$1
exec 9<"$2"
progress_reading hash 9 "$(stat -L -c %s /dev/fd/9)"
watcher=$progress_watcher
head -c 1000000 <&9 >/dev/null
for _ in $(seq 100); do
    grep -q '"bytes_done": 1000000,' "$PROGRESS" && break
    sleep 0.1
done
cat "$PROGRESS"
progress inspect
if kill -0 "$watcher" 2>/dev/null; then echo "watcher still running"; fi
cat "$PROGRESS"
"""


def test_the_hash_phase_counts_the_bytes_read_through_the_jobs_descriptor(tmp_path: Path) -> None:
    image = tmp_path / "image.sqsh"
    image.write_bytes(b"\0" * 3_000_000)
    program = job_steps.step("helpers") + job_steps.step("progress") + HASH_WATCH
    result = subprocess.run(
        ["bash", "-c", program, "bash", str(tmp_path / "progress.json"), str(image)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "watcher still running" not in result.stdout
    reading, inspecting = (json.loads(line) for line in result.stdout.splitlines())
    assert reading["phase"] == "hash"
    assert (reading["bytes_done"], reading["bytes_total"]) == (1_000_000, 3_000_000)
    assert inspecting["phase"] == "inspect"  # the reader stopped with the next phase
    assert not list(tmp_path.glob("progress.json.*"))


FAKE_CURL = r"""#!/bin/bash
# answers with $FAKE/body and $FAKE/status (a manifest: into -o, with -w's code 200); with
# $FAKE/hold holding N, writes N bytes of the body, then the rest once $FAKE/hold is gone
out=/dev/stdout
while (($#)); do
    case $1 in
    -o) out=$2; shift ;;
    -w) printf 200 ;;
    esac
    shift
done
if [ -f "$FAKE/hold" ]; then
    read -r held <"$FAKE/hold"
    head -c "$held" "$FAKE/body" >"$out"
    while [ -e "$FAKE/hold" ]; do sleep 0.1; done
    tail -c +$((held + 1)) "$FAKE/body" >>"$out"
else
    cat "$FAKE/body" >"$out"
fi
exit "$(cat "$FAKE/status")"
"""
REGISTRY = "https://registry.example.org/v2/team/app"


class CurlWorld:
    """The verifying curl alone, in front of FAKE_CURL, for a manifest of three layers (100,
    200 and 300 bytes) of which the cache holds the first."""

    def __init__(self, tmp_path: Path) -> None:
        self.chain, self.fake, cache = tmp_path / "chain", tmp_path / "fake", tmp_path / "cache"
        for directory in ("bin", "tmp", "manifests", "named", "configs", "checked"):
            (self.chain / directory).mkdir(parents=True)
        self.fake.mkdir()
        cache.mkdir()
        (self.chain / "bin" / "curl").write_text(verifying_curl())
        (self.chain / "bin" / "curl").chmod(0o700)
        (tmp_path / "real").write_text(FAKE_CURL)
        (tmp_path / "real").chmod(0o700)
        self.layers = [
            (hashlib.sha256(bytes([n])).hexdigest(), size)
            for n, size in ((1, 100), (2, 200), (3, 300))
        ]
        self.manifest = json.dumps(
            {
                "schemaVersion": 2,
                "config": {"digest": "sha256:" + "c" * 64, "size": 2},
                "layers": [{"digest": f"sha256:{d}", "size": s} for d, s in self.layers],
            }
        ).encode()
        self.pin = hashlib.sha256(self.manifest).hexdigest()
        (cache / self.layers[0][0]).write_bytes(b"cached")  # Enroot fetches no layer it has
        self.record = tmp_path / "progress.json"
        self.environment = {
            "PATH": os.environ["PATH"],
            "FAKE": str(self.fake),
            "SLURM_IMAGE_CHAIN": str(self.chain),
            "SLURM_IMAGE_CURL": str(tmp_path / "real"),
            "SLURM_IMAGE_PIN": self.pin,
            "SLURM_IMAGE_ARCH": "amd64",
            "SLURM_IMAGE_PROGRESS": str(self.record),
            "ENROOT_CACHE_PATH": str(cache),
        }

    def answer(self, body: bytes, status: int = 0) -> None:
        (self.fake / "body").write_bytes(body)
        (self.fake / "status").write_text(str(status))

    def curl(self, *args: str, body: bytes = b"", status: int = 0) -> int:
        self.answer(body, status)
        done = subprocess.run(
            [str(self.chain / "bin" / "curl"), *args],
            env=self.environment,
            capture_output=True,
            timeout=30,
        )
        return done.returncode

    def fetch_manifest(self, tmp_path: Path) -> int:
        url = f"{REGISTRY}/manifests/sha256:{self.pin}"
        output = tmp_path / "manifest"
        return self.curl(
            "-o", str(output), "-w", "%{http_code}", "-SsL", "--", url, body=self.manifest
        )

    def counters(self) -> tuple[Any, ...]:
        document = json.loads(self.record.read_text())
        names = ("phase", "layers_done", "layers_total", "bytes_done", "bytes_total")
        return tuple(document[name] for name in names)


def test_the_verifying_curl_counts_the_manifests_layers_cached_and_fetched(
    tmp_path: Path,
) -> None:
    world = CurlWorld(tmp_path)
    layers = world.layers
    assert world.fetch_manifest(tmp_path) == 0
    assert world.counters() == ("download", 1, 3, 100, 600)

    assert world.curl("-SsL", "-f", "--", f"{REGISTRY}/blobs/sha256:{layers[2][0]}", body=b"x") == 0
    assert world.counters() == ("download", 2, 3, 400, 600)

    # a blob curl fails for is not counted, and Enroot gets curl's status
    url = f"{REGISTRY}/blobs/sha256:{layers[1][0]}"
    assert world.curl("-SsL", "-f", "--", url, status=22) == 22
    assert world.counters() == ("download", 2, 3, 400, 600)
    # a blob the manifest does not list passes through uncounted
    assert world.curl("-SsL", "-f", "--", f"{REGISTRY}/blobs/sha256:{'e' * 64}", body=b"x") == 0
    assert world.counters() == ("download", 2, 3, 400, 600)
    assert not list(tmp_path.glob("progress.json.*"))


def test_a_layer_being_fetched_counts_what_its_curl_has_written_so_far(tmp_path: Path) -> None:
    world = CurlWorld(tmp_path)
    assert world.fetch_manifest(tmp_path) == 0
    digest, size = world.layers[2]
    body = os.urandom(size)
    world.answer(body)
    (world.fake / "hold").write_text("120")
    fetching = subprocess.Popen(
        [
            str(world.chain / "bin" / "curl"),
            "-SsL",
            "-f",
            "--",
            f"{REGISTRY}/blobs/sha256:{digest}",
        ],
        env=world.environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        partial = None
        for _ in range(100):  # the counter is read every second
            if world.counters() == ("download", 1, 3, 100 + 120, 600):
                partial = world.counters()
                break
            time.sleep(0.1)
        assert partial is not None, world.counters()
    finally:
        (world.fake / "hold").unlink()
    out, err = fetching.communicate(timeout=30)

    assert fetching.returncode == 0, err
    assert out == body  # Enroot reads the layer as curl wrote it
    assert world.counters() == ("download", 2, 3, 400, 600)
    assert list((world.chain / "progress" / "fetching").iterdir()) == []
    assert not list(tmp_path.glob("progress.json.*"))
