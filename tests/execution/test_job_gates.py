"""The script's gates before and around Enroot: requeue, staged files, CPUs, Enroot's version."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
from harness import JobFactory, Standin

UNREACHABLE = "127.0.0.1:9/slurm-image-test/none:1@sha256:" + "a" * 64
NODE = platform.machine()  # an import without an architecture is for the node's own


@pytest.mark.parametrize("count", ["1", "007", "18446744073709551616", "x"])
def test_requeued_job_exits_75_before_anything(
    make_job: JobFactory, image, standin: Standin, count: str
) -> None:
    # 2^64 wraps to 0 in bash arithmetic: it is a restart all the same
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    result = job.run({"SLURM_RESTART_COUNT": count})

    assert result.returncode == 75
    assert standin.calls() == []
    assert job.leftover_scratch() == []


@pytest.mark.parametrize("staged", ["inspector", "rc"])
@pytest.mark.parametrize("how", ["changed", "symlink"])
def test_staged_file_mismatch_exits_70_before_any_enroot_call(
    make_job: JobFactory, image, standin: Standin, tmp_path: Path, staged: str, how: str
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    path = Path(getattr(job.paths, staged))
    if how == "changed":
        path.chmod(0o700)
        with path.open("ab") as handle:
            handle.write(b"\n# tampered\n")
    else:
        copy = tmp_path / "same-bytes"
        copy.write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(copy)

    result = job.run()

    assert result.returncode == 70, result.stderr
    assert standin.calls() == []


@pytest.mark.parametrize(
    ("on_node", "per_node", "expected"),
    [
        ("4", None, "4"),
        (None, "4(x2)", "4"),
        (None, "4,2", "4"),
        (None, "16", "16"),
        ("3", "4(x2)", "3"),
    ],
)
def test_cpu_count_reaches_enroot_as_max_processors(
    make_job: JobFactory,
    image,
    standin: Standin,
    on_node: str | None,
    per_node: str | None,
    expected: str,
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    env = {}
    unset = []
    for key, value in (("SLURM_CPUS_ON_NODE", on_node), ("SLURM_JOB_CPUS_PER_NODE", per_node)):
        if value is None:
            unset.append(key)
        else:
            env[key] = value

    result = job.run(env, unset=tuple(unset))

    assert result.returncode == 0, result.stderr
    assert {call["env"]["ENROOT_MAX_PROCESSORS"] for call in standin.calls()} == {expected}
    assert "-processors" not in standin.calls()[1]["argv"]  # create: Enroot passes it itself


@pytest.mark.parametrize(
    ("on_node", "per_node"),
    [(None, None), ("0", None), ("02", None), ("abc", None), (None, "0"), (None, "02(x2)"),
     (None, "abc"), ("", ""), ("100000", None)],
)  # fmt: skip
def test_unusable_cpu_count_exits_64_before_any_enroot_call(
    make_job: JobFactory, image, standin: Standin, on_node: str | None, per_node: str | None
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    env = {}
    unset = []
    for key, value in (("SLURM_CPUS_ON_NODE", on_node), ("SLURM_JOB_CPUS_PER_NODE", per_node)):
        if value is None:
            unset.append(key)
        else:
            env[key] = value

    result = job.run(env, unset=tuple(unset))

    assert result.returncode == 64, result.stderr
    assert standin.calls() == []
    assert job.leftover_scratch() == []


def test_missing_job_id_exits_64(make_job: JobFactory, image, standin: Standin) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    assert job.run(unset=("SLURM_JOB_ID",)).returncode == 64
    assert standin.calls() == []


@pytest.mark.parametrize("version", ["3.4.0", "3.3.99", "2.9.9", "0.0.0"])
def test_import_refuses_enroot_older_than_3_4_1_with_78_before_any_other_call(
    make_job: JobFactory, standin: Standin, version: str
) -> None:
    standin.configure(version=version)
    job = make_job(operation="import_oci", role="client", source=UNREACHABLE)

    result = job.run()

    assert result.returncode == 78
    assert standin.commands() == ["version"]
    assert version in result.stderr and "3.4.1" in result.stderr
    assert job.leftover_scratch() == []


DIGEST_FORM = "docker://127.0.0.1:9#slurm-image-test/none:1@sha256:" + "a" * 64
TAG_FORM = "docker://127.0.0.1:9#slurm-image-test/none:sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("version", "uri", "squash"),
    [
        ("3.4.1", TAG_FORM, "-comp lzo -noD -mem 2048M"),
        ("3.5.0", TAG_FORM, "-comp lzo -noD -mem 2048M"),
        ("3.99.99", TAG_FORM, "-comp lzo -noD -mem 2048M"),
        ("4.0.0", DIGEST_FORM, "-comp lzo -noD -mem 2048M"),
        ("4.1.2", DIGEST_FORM, "-comp lzo -noD -exit-on-error -mem 2048M"),
    ],
)
def test_import_is_accepted_and_given_the_uri_form_that_enroot_reads(
    make_job: JobFactory, standin: Standin, version: str, uri: str, squash: str
) -> None:
    standin.configure(version=version)
    job = make_job(operation="import_oci", role="client", source=UNREACHABLE)

    result = job.run()

    # accepted: it imports (here from a registry that is not there: curl's exit 7)
    assert standin.commands() == ["version", "import"]
    assert standin.calls()[1]["argv"] == ["import", "-a", NODE, "-o", job.paths.partial, uri]
    event = standin.event("import")  # that Enroot read the registry, image and digest
    assert (event["user"], event["registry"], event["image"], event["reference"]) == (
        None,
        "127.0.0.1:9",
        "slurm-image-test/none",
        "sha256:" + "a" * 64,
    )
    assert result.returncode == 7
    assert "enroot import from 127.0.0.1:9 failed with status 7" in result.stderr
    assert not Path(job.paths.partial).exists()
    assert not Path(job.paths.candidate).exists()
    # -exit-on-error is in the default squash options of Enroot 4.1.0 and newer only
    assert standin.calls()[1]["env"]["ENROOT_SQUASH_OPTIONS"] == squash


@pytest.mark.parametrize(
    ("operation", "version"), [("import_oci", "2.1000.0"), ("inspect_sqsh", "2.1500.0")]
)
def test_a_large_minor_version_does_not_count_as_a_major_one(
    make_job: JobFactory, image, standin: Standin, operation: str, version: str
) -> None:
    standin.configure(version=version)
    source = UNREACHABLE if operation == "import_oci" else str(image("report"))
    job = make_job(operation=operation, role="client", source=source)

    result = job.run()

    assert result.returncode == 78, result.stderr
    assert standin.commands() == ["version"]


def test_squash_options_of_a_4_0_release_never_get_exit_on_error(
    make_job: JobFactory, standin: Standin
) -> None:
    standin.configure(version="4.0.1000")
    job = make_job(operation="import_oci", role="client", source=UNREACHABLE)

    job.run()

    assert standin.commands() == ["version", "import"]
    assert standin.calls()[1]["env"]["ENROOT_SQUASH_OPTIONS"] == "-comp lzo -noD -mem 2048M"


@pytest.mark.parametrize("version", ["3.5.0", "4.1.2", "3.5.0-rc1", "10.0.0+build.7"])
def test_inspect_accepts_enroot_3_5_and_newer(
    make_job: JobFactory, image, standin: Standin, version: str
) -> None:
    standin.configure(version=version)
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    result = job.run()

    assert result.returncode == 0, result.stderr
    assert standin.commands() == ["version", "create", "start", "remove"]


@pytest.mark.parametrize("version", ["3.4.1", "2.9.9", "3.4.99"])
def test_inspect_refuses_enroot_older_than_3_5_with_78(
    make_job: JobFactory, image, standin: Standin, version: str
) -> None:
    standin.configure(version=version)
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    result = job.run()

    assert result.returncode == 78
    assert standin.commands() == ["version"]


@pytest.mark.parametrize(
    "output",
    ["", "\n", "4.1\n", "enroot 4.1.2\n", "4.1.2 \n", "v4.1.2\n", "4.1.2\n4.1.2\n", "4.1.x\n",
     "4.1.2_rc\n", "4..2\n"],
)  # fmt: skip
def test_malformed_version_output_exits_78(
    make_job: JobFactory, image, standin: Standin, output: str
) -> None:
    standin.configure(version_output=output)
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    result = job.run()

    assert result.returncode == 78, result.stderr
    assert standin.commands() == ["version"]


def test_enroot_missing_from_job_path_exits_78(
    make_job: JobFactory, image, standin: Standin
) -> None:
    (standin.bin / "enroot").unlink()
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    result = job.run({"PATH": f"{standin.bin}:/usr/bin:/bin"})

    assert result.returncode == 78
