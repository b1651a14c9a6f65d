"""The batch script end to end with real images: the stand-in imports from the local registry
(scripts/local-registry up, scripts/test-images) with real squashfs-tools, and the real inspector
runs inside the unpacked Debian root."""

from __future__ import annotations

import hashlib
import platform
from pathlib import Path

import pytest
from harness import HTTP, JobFactory, Standin

from slurm_image.domain.inspection import validate_inspection


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def uri(reference: str) -> str:
    host, _, rest = reference.partition("/")
    return f"docker://{host}#{rest}"


@pytest.mark.e2e
def test_import_client_image_calls_version_import_create_start_remove(
    make_job: JobFactory, standin: Standin, registry_images: dict[str, str]
) -> None:
    source = registry_images["client"]
    job = make_job(operation="import_oci", role="client", source=source, environment=HTTP)

    result = job.run()

    assert result.returncode == 0, result.stderr
    assert standin.commands() == ["version", "import", "create", "start", "remove"]
    calls = [call["argv"] for call in standin.calls()]
    assert calls[1] == ["import", "-a", platform.machine(), "-o", job.paths.partial, uri(source)]
    # Enroot unpacks the job's private copy of the candidate's bytes (it reopens by path)
    private = Path(standin.calls()[0]["env"]["ENROOT_DATA_PATH"]).parent / "image.sqsh"
    assert calls[2][-1] == str(private)
    candidate = Path(job.paths.candidate)
    assert candidate.is_file() and not candidate.is_symlink()
    assert not Path(job.paths.partial).exists()
    record = validate_inspection(
        Path(job.paths.result).read_bytes(), role="client", sqsh_sha256=sha256(candidate)
    )
    facts = record.model_dump()["facts"]
    assert facts["installer"]["path"] == "/usr/bin/pip"
    assert facts["python"]["version"].startswith("3.11.")
    assert job.leftover_scratch() == []


@pytest.mark.e2e
def test_import_serving_image_records_vllm(
    make_job: JobFactory, standin: Standin, registry_images: dict[str, str]
) -> None:
    # the serving image's Env sets NVIDIA_VISIBLE_DEVICES=all, as CUDA images do
    source = registry_images["serving"]
    job = make_job(operation="import_oci", role="serving", source=source, environment=HTTP)

    result = job.run()

    assert result.returncode == 0, result.stderr
    record = validate_inspection(
        Path(job.paths.result).read_bytes(),
        role="serving",
        sqsh_sha256=sha256(Path(job.paths.candidate)),
    )
    server = record.model_dump()["facts"]["server"]
    assert (server["version"], server["path"]) == ("0.6.3", "/usr/local/bin/vllm")


@pytest.mark.e2e
def test_imported_image_without_python_exits_69(
    make_job: JobFactory, standin: Standin, registry_images: dict[str, str]
) -> None:
    source = registry_images["nopython"]
    job = make_job(operation="import_oci", role="client", source=source, environment=HTTP)

    result = job.run()

    assert result.returncode == 69, result.stderr
    assert standin.commands() == ["version", "import", "create", "start", "remove"]
    assert not Path(job.paths.result).exists()
    assert job.leftover_scratch() == []


@pytest.mark.e2e
def test_failed_import_removes_its_partial_file(
    make_job: JobFactory, standin: Standin, registry_images: dict[str, str], tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    standin.configure(hooks={"import": f'ls -l "$STANDIN_OUTPUT" >{seen}'}, fail={"import": 1})
    source = registry_images["nopython"]
    job = make_job(operation="import_oci", role="client", source=source, environment=HTTP)

    result = job.run()

    assert result.returncode == 1
    assert job.paths.partial in seen.read_text()  # it was there, half made
    assert not Path(job.paths.partial).exists()
    assert not Path(job.paths.candidate).exists()
    assert standin.commands() == ["version", "import"]
    assert job.leftover_scratch() == []


@pytest.mark.e2e
def test_import_from_a_plain_http_registry_needs_allow_http(
    make_job: JobFactory, standin: Standin, registry_images: dict[str, str]
) -> None:
    job = make_job(operation="import_oci", role="client", source=registry_images["nopython"])

    result = job.run()

    assert result.returncode == 35
    assert not Path(job.paths.partial).exists()
    assert job.leftover_scratch() == []


@pytest.mark.debian_roots
def test_inspect_a_debian_image_with_the_real_inspector(
    make_job: JobFactory, standin: Standin, bookworm_image: Path, tmp_path: Path
) -> None:
    source = tmp_path / "bookworm.sqsh"
    source.hardlink_to(bookworm_image)
    job = make_job(operation="inspect_sqsh", role="client", source=str(source))

    result = job.run()

    assert result.returncode == 0, result.stderr
    assert standin.commands() == ["version", "create", "start", "remove"]
    record = validate_inspection(
        Path(job.paths.result).read_bytes(), role="client", sqsh_sha256=sha256(source)
    )
    facts = record.model_dump()["facts"]
    assert facts["installer"]["path"] == "/usr/bin/pip"
    assert facts["python"]["implementation"] == "cpython"


@pytest.mark.debian_roots
def test_inspect_a_debian_image_as_serving_is_refused_without_vllm(
    make_job: JobFactory, standin: Standin, bookworm_image: Path, tmp_path: Path
) -> None:
    source = tmp_path / "bookworm.sqsh"
    source.hardlink_to(bookworm_image)
    job = make_job(operation="inspect_sqsh", role="serving", source=str(source))

    result = job.run()

    assert result.returncode == 76
    assert not Path(job.paths.result).exists()
