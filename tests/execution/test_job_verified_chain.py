"""The import job verifies the chain from the pinned digest to the bytes squashed (README, Threat
model), against a registry that lies (tests/lying_registry.py) in front of the local one: a
swapped manifest, a swapped manifest behind an index, an index smuggled in an error answer, and
an image config whose WorkingDir leads out of Enroot's root."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import HTTP, Job, JobFactory, Result, Standin

from lying_registry import (
    CLIENT,
    LIST_V2,
    NOPYTHON,
    Answer,
    LyingRegistry,
    digest_of,
    index_of,
    lying_registry,
    pinned,
    with_config,
)
from slurm_image.domain.verified_chain import validate_chain_record

pytestmark = pytest.mark.e2e


@pytest.fixture
def registry(registry_images: dict[str, str]) -> Iterator[LyingRegistry]:
    with lying_registry() as lying:
        yield lying


def source(registry: LyingRegistry, repository: str, digest: str) -> str:
    return f"{registry.address}/{repository}:1@{digest}"


def run_import(make_job: JobFactory, reference: str, version: str = "4.1.2") -> tuple[Job, Result]:
    job = make_job(operation="import_oci", role="client", source=reference, environment=HTTP)
    job.standin.configure(version=version)
    return job, job.run()


def refused(job: Job, result: Result, what: str) -> None:
    assert result.returncode == 79, result.stderr
    assert "does not match the pinned digest" in result.stderr
    assert what in result.stderr
    assert not Path(job.paths.candidate).exists()
    assert not Path(job.paths.partial).exists()
    assert not (Path(job.paths.job_dir) / "chain.json").exists()
    assert job.standin.commands() == ["version", "import"]
    assert job.leftover_scratch() == []


def chain(job: Job) -> dict[str, str]:
    """The job's chain.json, which the host's publication accepts for this plan's pin."""
    data = (Path(job.paths.job_dir) / "chain.json").read_bytes()
    assert job.plan.source_digest is not None
    validate_chain_record(data, pinned=job.plan.source_digest)
    record: dict[str, str] = json.loads(data)
    return record


def config_digest(registry: LyingRegistry, repository: str, digest: str) -> str:
    manifest = json.loads(registry.manifest(repository, digest))
    value: str = manifest["config"]["digest"]
    return value


@pytest.mark.parametrize("version", ["3.4.1", "4.1.2"])
def test_a_manifest_swapped_for_the_pinned_digest_fails_the_job_with_79(
    make_job: JobFactory,
    registry: LyingRegistry,
    registry_images: dict[str, str],
    version: str,
) -> None:
    pin = pinned(registry_images, "nopython")
    other = registry.manifest(CLIENT, pinned(registry_images, "client"))
    registry.answer(Answer(f"/v2/{NOPYTHON}/manifests/{pin}", other))

    job, result = run_import(make_job, source(registry, NOPYTHON, pin), version)

    refused(job, result, f"answered manifest {pin} with a manifest of {digest_of(other)}")


def test_the_genuine_image_through_the_same_registry_imports_and_records_its_chain(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    pin = pinned(registry_images, "nopython")

    job, result = run_import(make_job, source(registry, NOPYTHON, pin))

    assert result.returncode == 69, result.stderr  # imported; no Python to inspect
    assert Path(job.paths.candidate).is_file()
    config = config_digest(registry, NOPYTHON, pin)
    assert chain(job) == {"pinned": pin, "manifest": pin, "config": config}
    assert f"verified chain: pinned {pin}, manifest {pin}, config {config}" in result.stderr


def test_an_index_whose_selected_manifest_is_swapped_fails_the_job_with_79(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    genuine = registry.manifest(NOPYTHON, pinned(registry_images, "nopython"))
    index = registry.add_manifest(NOPYTHON, index_of([("amd64", genuine)]), LIST_V2)
    other = registry.manifest(CLIENT, pinned(registry_images, "client"))
    registry.answer(Answer(f"/v2/{NOPYTHON}/manifests/{digest_of(genuine)}", other))

    job, result = run_import(make_job, source(registry, NOPYTHON, index))

    refused(job, result, f"with a manifest of {digest_of(other)}")


def test_an_index_imports_the_manifest_it_names_and_the_chain_records_both(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    nopython = pinned(registry_images, "nopython")
    genuine = registry.manifest(NOPYTHON, nopython)
    index = registry.add_manifest(NOPYTHON, index_of([("amd64", genuine)]), LIST_V2)

    job, result = run_import(make_job, source(registry, NOPYTHON, index))

    assert result.returncode == 69, result.stderr
    config = config_digest(registry, NOPYTHON, nopython)
    assert chain(job) == {"pinned": index, "manifest": nopython, "config": config}


@pytest.mark.parametrize("status", [404, 401])
def test_an_index_in_an_error_answer_never_reaches_enroot(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str], status: int
) -> None:
    # Enroot reads the body of a 404 or 401 manifest-list answer all the same: this one would
    # choose the client image's (genuine, hash-correct) manifest for the nopython pin
    pin = pinned(registry_images, "nopython")
    client = registry.manifest(CLIENT, pinned(registry_images, "client"))
    registry.add_manifest(NOPYTHON, client)  # genuine, and served by its digest
    smuggled = index_of([("amd64", client)])
    registry.answer(Answer(f"/v2/{NOPYTHON}/manifests/{pin}", smuggled, status, accept=LIST_V2))

    job, result = run_import(make_job, source(registry, NOPYTHON, pin))

    assert result.returncode == 69, result.stderr  # the pinned image, not the client one
    assert chain(job)["config"] == config_digest(registry, NOPYTHON, pin)
    fetched = [path for method, path, _ in registry.requests if method == "GET"]
    assert f"/v2/{NOPYTHON}/manifests/{digest_of(client)}" not in fetched


def hostile_config(registry: LyingRegistry, registry_images: dict[str, str], workdir: str) -> str:
    """The nopython image with ``workdir`` as its config's WorkingDir, served by its digest."""
    pin = pinned(registry_images, "nopython")
    config = registry.config(NOPYTHON, pin)
    config["config"]["WorkingDir"] = workdir
    blob = json.dumps(config).encode()
    registry.add_blob(NOPYTHON, blob)
    return registry.add_manifest(NOPYTHON, with_config(registry.manifest(NOPYTHON, pin), blob))


def escape(target: Path) -> str:
    """A WorkingDir that Enroot's `mkdir -p "${rootfs}${workdir}"` turns into ``target``."""
    return "/" + "../" * 40 + str(target).lstrip("/")


def test_a_working_dir_that_leads_out_of_the_root_is_refused_and_never_created(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str], tmp_path: Path
) -> None:
    target = tmp_path / "made-by-the-image"
    digest = hostile_config(registry, registry_images, escape(target))

    job, result = run_import(make_job, source(registry, NOPYTHON, digest))

    refused(job, result, "not a normalized absolute path")
    assert not target.exists()


@pytest.mark.parametrize("workdir", ["srv/app", "/srv/./app", "/srv//app", "/srv/app/", "/a\nb"])
def test_a_working_dir_that_is_not_a_normalized_absolute_path_is_refused(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str], workdir: str
) -> None:
    digest = hostile_config(registry, registry_images, workdir)

    job, result = run_import(make_job, source(registry, NOPYTHON, digest))

    refused(job, result, "not a normalized absolute path")


def test_a_normalized_working_dir_imports(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    digest = hostile_config(registry, registry_images, "/srv/app")

    job, result = run_import(make_job, source(registry, NOPYTHON, digest))

    assert result.returncode == 69, result.stderr
    assert chain(job)["pinned"] == digest
    listing = subprocess.run(
        ["unsquashfs", "-l", job.paths.candidate], capture_output=True, text=True, check=True
    )
    assert "squashfs-root/srv/app\n" in listing.stdout  # Enroot made it inside the root


def test_a_job_whose_import_verified_nothing_fails_closed(
    make_job: JobFactory, registry: LyingRegistry, registry_images: dict[str, str], standin: Standin
) -> None:
    # an Enroot that fetched its manifest some other way than curl: the chain was not observed
    pin = pinned(registry_images, "nopython")
    job = make_job(
        operation="import_oci",
        role="client",
        source=source(registry, NOPYTHON, pin),
        environment=HTTP,
    )
    standin.configure(hooks={"import": 'rm -f "$TMPDIR"/../chain/manifests/*'})

    result = job.run()

    assert result.returncode == 79, result.stderr
    assert "verified no manifest of the pinned digest" in result.stderr
    assert not Path(job.paths.candidate).exists()
    assert not (Path(job.paths.job_dir) / "chain.json").exists()
