"""The job's architecture: the plan's, else the node's for an import; refused (81) before anything
is imported when the node cannot run it, natively or through a binfmt_misc handler (here a
directory of fake handlers the job is pointed at); passed to Enroot as ``-a``; recorded beside
chain.json; and the imported image must be of it (82), behind a registry that lies
(tests/lying_registry.py) where an image must say another architecture than its own."""

from __future__ import annotations

import json
import platform
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import (
    HTTP,
    QEMU_MASK,
    Job,
    JobFactory,
    Standin,
    binfmt_handler,
    binfmt_magic,
    fake_binfmt_misc,
)

from lying_registry import (
    LIST_V2,
    NOPYTHON,
    LyingRegistry,
    digest_of,
    index_of,
    lying_registry,
    pinned,
    with_config,
)
from slurm_image.domain.architecture import ARCHITECTURES, oci_name

pytestmark = pytest.mark.e2e

NATIVE = platform.machine()
FOREIGN = next(name for name in ARCHITECTURES if name != NATIVE)


def handler(**fields: Any) -> str:
    return binfmt_handler(FOREIGN, **fields)


def qemu_magic(architecture: str) -> str:
    return binfmt_magic(architecture)


BinfmtFactory = Callable[..., Path]


@pytest.fixture
def binfmt_misc(tmp_path: Path) -> BinfmtFactory:
    def make(status: str | None = "enabled", **handlers: str) -> Path:
        return fake_binfmt_misc(tmp_path / "binfmt_misc", status, **handlers)

    return make


@pytest.fixture
def registry(registry_images: dict[str, str]) -> Iterator[LyingRegistry]:
    with lying_registry() as lying:
        yield lying


def source(registry: LyingRegistry, digest: str) -> str:
    return f"{registry.address}/{NOPYTHON}:1@{digest}"


def import_job(make_job: JobFactory, reference: str, architecture: str | None = None) -> Job:
    return make_job(
        operation="import_oci",
        role="client",
        source=reference,
        environment=HTTP,
        architecture=architecture,
    )


def imported_nothing(job: Job) -> None:
    for path in (job.paths.candidate, job.paths.partial, f"{job.paths.job_dir}/chain.json"):
        assert path is not None and not Path(path).exists(), path
    assert not job.architecture_record.exists()
    assert job.leftover_scratch() == []


def import_arch(standin: Standin) -> str:
    (call,) = [call for call in standin.calls() if call["argv"][0] == "import"]
    argv: list[str] = call["argv"]
    assert argv[1] == "-a", argv
    return argv[2]


# -- the node cannot run it: 81, nothing imported -------------------------------------------


CANNOT = {
    "handler-without-flag-F": (
        {"qemu": handler(flags="POC")},
        "qemu has no flag F (its interpreter would be looked up in the image)",
    ),
    "disabled-handler": ({"qemu": handler(enabled=False)}, "qemu is disabled"),
    "magic-of-another-architecture": (
        {"qemu": handler(magic=qemu_magic(NATIVE))},
        f"no enabled binfmt_misc handler with flag F runs {FOREIGN}",
    ),
    "magic-of-32-bit-executables": (
        {"qemu": handler(magic=qemu_magic(FOREIGN).replace("7f454c4602", "7f454c4601", 1))},
        f"no enabled binfmt_misc handler with flag F runs {FOREIGN}",
    ),
    "magic-of-executables-only": (
        {"qemu": handler(mask=QEMU_MASK.replace("feff", "ffff"))},
        f"no enabled binfmt_misc handler with flag F runs {FOREIGN}",
    ),
    "no-handler": ({}, f"no enabled binfmt_misc handler with flag F runs {FOREIGN}"),
}


@pytest.mark.parametrize("case", sorted(CANNOT))
def test_an_import_for_an_architecture_the_node_cannot_run_exits_81_before_importing(
    make_job: JobFactory,
    binfmt_misc: BinfmtFactory,
    standin: Standin,
    registry: LyingRegistry,
    registry_images: dict[str, str],
    case: str,
) -> None:
    handlers, reason = CANNOT[case]
    job = import_job(make_job, source(registry, pinned(registry_images, "nopython")), FOREIGN)
    job.use_binfmt_misc(binfmt_misc(**handlers))

    result = job.run()

    assert result.returncode == 81, result.stderr
    assert f"this {NATIVE} node cannot run {FOREIGN} executables" in result.stderr
    assert reason in result.stderr
    assert "register qemu-user-static" in result.stderr and "flag F" in result.stderr
    assert f"a partition of {FOREIGN} nodes" in result.stderr
    assert standin.commands() == ["version"]
    assert registry.requests == []
    imported_nothing(job)


@pytest.mark.parametrize(
    ("status", "reason"),
    [(None, "binfmt_misc is not mounted at"), ("disabled", "binfmt_misc is disabled")],
    ids=["not-mounted", "disabled"],
)
def test_binfmt_misc_not_mounted_or_disabled_runs_no_other_architecture(
    make_job: JobFactory,
    binfmt_misc: BinfmtFactory,
    standin: Standin,
    registry: LyingRegistry,
    registry_images: dict[str, str],
    status: str | None,
    reason: str,
) -> None:
    job = import_job(make_job, source(registry, pinned(registry_images, "nopython")), FOREIGN)
    job.use_binfmt_misc(binfmt_misc(status, qemu=handler()))

    result = job.run()

    assert result.returncode == 81, result.stderr
    assert reason in result.stderr
    assert standin.commands() == ["version"]
    imported_nothing(job)


# -- the node runs it: -a, the record, and the image must be of it ------------------------------


def test_an_import_without_an_architecture_is_for_the_nodes_own_and_records_it(
    make_job: JobFactory,
    binfmt_misc: BinfmtFactory,
    standin: Standin,
    registry: LyingRegistry,
    registry_images: dict[str, str],
) -> None:
    job = import_job(make_job, source(registry, pinned(registry_images, "nopython")))
    job.use_binfmt_misc(binfmt_misc(None))  # no emulation needed for the node's own

    result = job.run()

    assert result.returncode == 69, result.stderr  # imported; no Python to inspect
    assert Path(job.paths.candidate).is_file()
    assert job.architecture_record.read_text() == f"{NATIVE}\n"
    assert import_arch(standin) == NATIVE
    assert standin.event("import")["arch"] == NATIVE


def test_a_foreign_architecture_through_a_good_handler_is_imported_for_and_checked(
    make_job: JobFactory,
    binfmt_misc: BinfmtFactory,
    standin: Standin,
    registry: LyingRegistry,
    registry_images: dict[str, str],
) -> None:
    # the test image is the node's own architecture: Enroot imports it for -a FOREIGN (it only
    # warns), and the job refuses what its config says
    pin = pinned(registry_images, "nopython")
    job = import_job(make_job, source(registry, pin), FOREIGN)
    job.use_binfmt_misc(
        binfmt_misc(**{"jar": handler(magic="504b0304", mask=None), "q": handler()})
    )

    result = job.run()

    assert import_arch(standin) == FOREIGN
    assert result.returncode == 82, result.stderr
    assert (
        f"the image's config sha256:{config_hex(registry, pin)} says {oci_name(NATIVE)}, the job"
        f" imported for {FOREIGN} ({oci_name(FOREIGN)})"
    ) in result.stderr
    imported_nothing(job)


def config_hex(registry: LyingRegistry, pin: str) -> str:
    digest: str = json.loads(registry.manifest(NOPYTHON, pin))["config"]["digest"]
    return digest.removeprefix("sha256:")


def image_saying(registry: LyingRegistry, pin: str, architecture: str) -> tuple[bytes, str]:
    """The test image with a config that says ``architecture``, served by its digest: (the
    manifest, the config's digest)."""
    config = registry.config(NOPYTHON, pin)
    config["architecture"] = architecture
    blob = json.dumps(config).encode()
    registry.add_blob(NOPYTHON, blob)
    manifest = with_config(registry.manifest(NOPYTHON, pin), blob)
    registry.add_manifest(NOPYTHON, manifest)
    return manifest, digest_of(blob)


def test_an_image_whose_config_says_another_architecture_fails_with_82_keeping_nothing(
    make_job: JobFactory, standin: Standin, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    said = oci_name(FOREIGN)
    manifest, config = image_saying(registry, pinned(registry_images, "nopython"), said)
    job = import_job(make_job, source(registry, digest_of(manifest)))

    result = job.run()

    assert result.returncode == 82, result.stderr
    assert f"the image's config {config} says {said}, the job imported for {NATIVE}" in (
        result.stderr
    )
    assert standin.commands() == ["version", "import"]
    imported_nothing(job)


def test_an_index_without_a_manifest_for_the_architecture_fails_with_82(
    make_job: JobFactory,
    binfmt_misc: BinfmtFactory,
    standin: Standin,
    registry: LyingRegistry,
    registry_images: dict[str, str],
) -> None:
    genuine = registry.manifest(NOPYTHON, pinned(registry_images, "nopython"))
    index = registry.add_manifest(NOPYTHON, index_of([(oci_name(NATIVE), genuine)]), LIST_V2)
    job = import_job(make_job, source(registry, index), FOREIGN)
    job.use_binfmt_misc(binfmt_misc(qemu=handler()))

    result = job.run()

    assert result.returncode == 82, result.stderr
    assert (
        f"the index {index} names no manifest for {FOREIGN} ({oci_name(FOREIGN)}), only for:"
        f" {oci_name(NATIVE)}"
    ) in result.stderr
    imported_nothing(job)


def test_an_enroot_that_fetches_another_architectures_index_entry_fails_with_79(
    make_job: JobFactory,
    binfmt_misc: BinfmtFactory,
    standin: Standin,
    registry: LyingRegistry,
    registry_images: dict[str, str],
) -> None:
    # an Enroot that picks the node's own architecture whatever -a says: the verifying curl
    # hands it no manifest the index names for another architecture
    genuine = registry.manifest(NOPYTHON, pinned(registry_images, "nopython"))
    other, _ = image_saying(registry, pinned(registry_images, "nopython"), oci_name(FOREIGN))
    entries = [(oci_name(NATIVE), genuine), (oci_name(FOREIGN), other)]
    index = registry.add_manifest(NOPYTHON, index_of(entries), LIST_V2)
    (standin.bin / "enroot").rename(standin.bin / "enroot-standin")
    (standin.bin / "enroot").write_text(
        "#!/bin/bash\n"
        '[ "$1" != import ] || set -- import -a "$(uname -m)" "${@:4}"\n'
        f'exec {standin.bin / "enroot-standin"} "$@"\n'
    )
    (standin.bin / "enroot").chmod(0o755)
    job = import_job(make_job, source(registry, index), FOREIGN)
    job.use_binfmt_misc(binfmt_misc(qemu=handler()))

    result = job.run()

    assert result.returncode == 79, result.stderr
    assert (
        f"manifest {digest_of(genuine)} is named by its index for {oci_name(NATIVE)}, not for"
        f" {oci_name(FOREIGN)}"
    ) in result.stderr
    assert standin.event("import")["arch"] == NATIVE
    imported_nothing(job)


def test_an_architecture_record_that_exists_is_never_overwritten(
    make_job: JobFactory, standin: Standin, registry: LyingRegistry, registry_images: dict[str, str]
) -> None:
    job = import_job(make_job, source(registry, pinned(registry_images, "nopython")))
    job.architecture_record.write_text("ppc64le\n")

    result = job.run()

    assert result.returncode == 73, result.stderr
    assert f"{job.architecture_record} already exists" in result.stderr
    assert job.architecture_record.read_text() == "ppc64le\n"
    assert standin.commands() == ["version"]


# -- inspect ------------------------------------------------------------------------------------


def inspect_job(make_job: JobFactory, sqsh: Path, architecture: str | None) -> Job:
    return make_job(
        operation="inspect_sqsh", role="client", source=str(sqsh), architecture=architecture
    )


def test_an_inspect_for_an_architecture_the_node_cannot_run_exits_81_before_unpacking(
    make_job: JobFactory,
    binfmt_misc: BinfmtFactory,
    standin: Standin,
    image: Callable[[str], Path],
) -> None:
    job = inspect_job(make_job, image("report"), FOREIGN)
    job.use_binfmt_misc(binfmt_misc(qemu=handler(flags="")))

    result = job.run()

    assert result.returncode == 81, result.stderr
    assert "qemu has no flag F" in result.stderr
    assert standin.commands() == ["version"]
    assert not job.architecture_record.exists()


def test_an_inspect_for_an_architecture_the_node_runs_records_it(
    make_job: JobFactory,
    binfmt_misc: BinfmtFactory,
    standin: Standin,
    image: Callable[[str], Path],
) -> None:
    job = inspect_job(make_job, image("report"), FOREIGN)
    job.use_binfmt_misc(binfmt_misc(qemu=handler()))

    result = job.run()

    assert result.returncode == 0, result.stderr
    assert job.architecture_record.read_text() == f"{FOREIGN}\n"
    assert "create" in standin.commands()


def test_an_inspect_without_an_architecture_checks_and_records_none(
    make_job: JobFactory,
    binfmt_misc: BinfmtFactory,
    standin: Standin,
    image: Callable[[str], Path],
) -> None:
    job = inspect_job(make_job, image("report"), None)
    job.use_binfmt_misc(binfmt_misc(None))

    result = job.run()

    assert result.returncode == 0, result.stderr
    assert not job.architecture_record.exists()
    assert "architecture" not in result.stderr
