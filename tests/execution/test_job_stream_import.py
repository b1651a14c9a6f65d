"""The batch script with image_build.importer = "stream": the manifest, config and layers fetched
through the verifying curl, each layer checked against its digest, merged by merge_layers.py into
tar2sqfs, and the image handed to the steps that follow Enroot's import (the pin, `enroot
create` and `start`, the inspection). The registry lies (tests/lying_registry.py) where a test
needs it to."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import HTTP, Job, JobFactory, Result, Standin, need, path_without

from lying_registry import (
    CLIENT,
    NOPYTHON,
    Answer,
    LyingRegistry,
    digest_of,
    lying_registry,
    pinned,
)
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.inspection import validate_inspection
from slurm_image.domain.verified_chain import validate_chain_record

pytestmark = pytest.mark.e2e


@pytest.fixture
def registry(registry_images: dict[str, str]) -> Iterator[LyingRegistry]:
    need(shutil.which("tar2sqfs") is not None, "tar2sqfs missing (squashfs-tools-ng)")
    with lying_registry() as lying:
        yield lying


def source(registry: LyingRegistry, repository: str, digest: str) -> str:
    return f"{registry.address}/{repository}:1@{digest}"


def run_import(make_job: JobFactory, reference: str, **options: str) -> tuple[Job, Result]:
    job = make_job(
        operation="import_oci", role="client", source=reference, environment=HTTP, **options
    )
    return job, job.run()


def facts(job: Job) -> dict[str, object]:
    candidate = Path(job.paths.candidate)
    sqsh_sha256 = hashlib.sha256(candidate.read_bytes()).hexdigest()
    record = validate_inspection(
        Path(job.paths.result).read_bytes(), role="client", sqsh_sha256=sqsh_sha256
    )
    found: dict[str, object] = record.model_dump()["facts"]
    return found


def chain(job: Job) -> dict[str, str]:
    data = (Path(job.paths.job_dir) / "chain.json").read_bytes()
    assert job.plan.source_digest is not None
    validate_chain_record(data, pinned=job.plan.source_digest)
    record: dict[str, str] = json.loads(data)
    return record


def nothing_kept(job: Job) -> None:
    assert not Path(job.paths.candidate).exists()
    assert not Path(job.paths.partial).exists()
    assert not (Path(job.paths.job_dir) / "chain.json").exists()
    assert job.leftover_scratch() == []


def with_top_layer(registry: LyingRegistry, repository: str, pin: str, layer: bytes) -> str:
    """The image ``pin`` with ``layer`` on top, served by ``registry``: its manifest digest."""
    manifest = json.loads(registry.manifest(repository, pin))
    manifest["layers"].append(
        {
            "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
            "size": len(layer),
            "digest": registry.add_blob(repository, layer),
        }
    )
    return registry.add_manifest(repository, json.dumps(manifest, indent=3).encode())


def test_a_stream_import_publishes_the_facts_and_chain_enroots_import_does(
    make_job: JobFactory, standin: Standin, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    reference = source(registry, CLIENT, pinned(registry_images, "client"))
    by_enroot, result = run_import(make_job, reference)
    assert result.returncode == 0, result.stderr

    job, result = run_import(make_job, reference, importer="stream")

    assert result.returncode == 0, result.stderr
    # Enroot starts the image; it imports nothing
    assert standin.commands()[-4:] == ["version", "create", "start", "remove"]
    assert facts(job) == facts(by_enroot)
    assert chain(job) == chain(by_enroot)
    assert not Path(job.paths.partial).exists()
    assert job.leftover_scratch() == []


def test_a_manifest_swapped_for_the_pin_fails_the_stream_import_with_79(
    make_job: JobFactory, standin: Standin, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin = pinned(registry_images, "nopython")
    other = registry.manifest(CLIENT, pinned(registry_images, "client"))
    registry.answer(Answer(f"/v2/{NOPYTHON}/manifests/{pin}", other))

    job, result = run_import(make_job, source(registry, NOPYTHON, pin), importer="stream")

    assert result.returncode == 79, result.stderr
    assert f"answered manifest {pin} with a manifest of {digest_of(other)}" in result.stderr
    assert standin.commands() == ["version"]
    nothing_kept(job)


def test_a_layer_of_other_bytes_fails_the_stream_import_naming_it(
    make_job: JobFactory, standin: Standin, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin = pinned(registry_images, "client")
    layer = json.loads(registry.manifest(CLIENT, pin))["layers"][-1]["digest"]
    lie = gzip.compress(b"other bytes", mtime=0)
    registry.answer(Answer(f"/v2/{CLIENT}/blobs/{layer}", lie))

    job, result = run_import(make_job, source(registry, CLIENT, pin), importer="stream")

    assert result.returncode == 79, result.stderr
    assert f"answered blob {layer} with bytes of {digest_of(lie)}" in result.stderr
    assert standin.commands() == ["version"]
    nothing_kept(job)


def test_a_layer_the_streamer_cannot_read_fails_the_job_with_86(
    make_job: JobFactory, standin: Standin, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    # its digest is right; it is no tar (tar2sqfs alone would squash what came before it)
    digest = with_top_layer(
        registry, CLIENT, pinned(registry_images, "client"), gzip.compress(b"no tar", mtime=0)
    )

    job, result = run_import(make_job, source(registry, CLIENT, digest), importer="stream")

    assert result.returncode == 86, result.stderr
    assert "merging the image's layers failed (merge_layers.py exited 3)" in result.stderr
    assert standin.commands() == ["version"]
    nothing_kept(job)


def test_a_node_without_tar2sqfs_fails_the_stream_import_with_85(
    make_job: JobFactory,
    standin: Standin,
    registry: LyingRegistry,
    registry_images: dict[str, str],
    world_readable_tmp: Path,
) -> None:
    system = path_without(world_readable_tmp / "bin", "tar2sqfs")
    reference = source(registry, CLIENT, pinned(registry_images, "client"))

    job, result = run_import(make_job, reference, importer="stream", system_path=system)

    assert result.returncode == 85, result.stderr
    assert "tar2sqfs is missing" in result.stderr
    assert standin.commands() == ["version"]
    assert not any("/blobs/" in path for _, path, _ in registry.requests)
    nothing_kept(job)


@pytest.mark.parametrize(
    ("squash_options", "compression"),
    [
        (None, "Compression lzo\n\talgorithm lzo1x_1\n"),
        ("-comp gzip -noD -mem 512M", "Compression gzip\n\tcompression-level 1\n"),
        ("-comp lzo", "Compression lzo\nBlock size"),
        ("-noD -mem 512M", "Compression gzip\n\tcompression-level 1\n"),
    ],
    ids=["enroot-default", "gzip-noD", "lzo-data-compressed", "mksquashfs-default-noD"],
)
def test_the_stream_import_squashes_as_enroot_would_plain_data_at_the_fastest_level(
    make_job: JobFactory,
    registry: LyingRegistry,
    registry_images: dict[str, str],
    squash_options: str | None,
    compression: str,
) -> None:
    """Enroot's -noD leaves data blocks uncompressed; tar2sqfs compresses every block, so with
    -noD it does with the compressor's fastest setting, and without it with the compressor's
    own."""
    environment = dict(HTTP)
    if squash_options:
        environment["ENROOT_SQUASH_OPTIONS"] = squash_options
    job = make_job(
        operation="import_oci",
        role="client",
        source=source(registry, CLIENT, pinned(registry_images, "client")),
        environment=environment,
        importer="stream",
    )

    result = job.run()

    assert result.returncode == 0, result.stderr
    superblock = subprocess.run(
        ["unsquashfs", "-s", job.paths.candidate], capture_output=True, text=True, check=True
    ).stdout
    assert compression in superblock


@pytest.mark.parametrize("bearer", [False, True], ids=["basic", "bearer"])
def test_a_stream_import_from_a_registry_that_wants_a_login_uses_the_staged_one(
    make_job: JobFactory, standin: Standin, registry_images: dict[str, str], bearer: bool
) -> None:
    need(shutil.which("tar2sqfs") is not None, "tar2sqfs missing (squashfs-tools-ng)")
    with lying_registry(login=("builder", "s3cret"), bearer=bearer) as registry:
        reference = source(registry, CLIENT, pinned(registry_images, "client"))
        job = make_job(
            operation="import_oci",
            role="client",
            source=reference,
            environment=HTTP,
            importer="stream",
            credentials=RegistryCredentials("127.0.0.1", "builder", "s3cret"),
        )

        result = job.run()

        assert result.returncode == 0, result.stderr
        assert standin.commands() == ["version", "create", "start", "remove"]
        tokens = [path for _, path, _ in registry.requests if path.startswith("/token?")]
        assert len(tokens) == (1 if bearer else 0)
        if bearer:  # the challenge named no scope: the job asks for pull of the repository
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(tokens[0]).query)
            assert query == {"service": ["lying"], "scope": [f"repository:{CLIENT}:pull"]}
    assert job.leftover_scratch() == []
    assert not Path(job.paths.enroot_config, ".credentials").exists()


def test_a_stream_import_without_the_login_a_registry_wants_fails_saying_so(
    make_job: JobFactory, standin: Standin, registry_images: dict[str, str]
) -> None:
    need(shutil.which("tar2sqfs") is not None, "tar2sqfs missing (squashfs-tools-ng)")
    with lying_registry(login=("builder", "s3cret")) as registry:
        reference = source(registry, CLIENT, pinned(registry_images, "client"))
        job, result = run_import(make_job, reference, importer="stream")

    assert result.returncode == 22, result.stderr
    assert "failed with status 22, without credentials" in result.stderr
    assert standin.commands() == ["version"]
    nothing_kept(job)
