"""The script's checks of the image and the result: exits 73, 66, 69, 74, 76 and what is left."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from harness import JobFactory, Standin

UNREACHABLE = "127.0.0.1:9/slurm-image-test/none:1@sha256:" + "a" * 64


@pytest.mark.parametrize("which", ["candidate", "partial"])
@pytest.mark.parametrize("kind", ["file", "dangling-symlink", "symlink-to-file", "directory"])
def test_import_refuses_an_existing_candidate_or_partial_with_73(
    make_job: JobFactory, standin: Standin, tmp_path: Path, which: str, kind: str
) -> None:
    job = make_job(operation="import_oci", role="client", source=UNREACHABLE)
    target = Path(getattr(job.paths, which))
    elsewhere = tmp_path / "elsewhere.sqsh"
    if kind == "file":
        target.write_bytes(b"earlier")
    elif kind == "dangling-symlink":
        target.symlink_to(elsewhere)
    elif kind == "symlink-to-file":
        elsewhere.write_bytes(b"precious")
        target.symlink_to(elsewhere)
    else:
        target.mkdir()

    result = job.run()

    assert result.returncode == 73, result.stderr
    assert standin.commands() == ["version"]  # never `enroot import -o` through a link
    if kind == "file":
        assert target.read_bytes() == b"earlier"
    elif kind == "dangling-symlink":
        assert target.is_symlink() and os.readlink(target) == str(elsewhere)
        assert not elsewhere.exists()
    elif kind == "symlink-to-file":
        assert target.is_symlink() and elsewhere.read_bytes() == b"precious"
    else:
        assert target.is_dir()
    assert job.leftover_scratch() == []


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink", "missing", "dangling-symlink"])
def test_inspect_refuses_a_source_that_is_not_a_regular_file_with_66(
    make_job: JobFactory, image, standin: Standin, tmp_path: Path, kind: str
) -> None:
    real = image("report")
    source = tmp_path / "images" / f"{kind}.sqsh"
    if kind == "fifo":
        os.mkfifo(source)
    elif kind == "directory":
        source.mkdir()
    elif kind == "symlink":
        source.symlink_to(real)
    elif kind == "dangling-symlink":
        source.symlink_to(tmp_path / "nothing.sqsh")
    job = make_job(operation="inspect_sqsh", role="client", source=str(source))

    result = job.run(timeout=30)  # a FIFO opened for reading would block: it must not be

    assert result.returncode == 66, result.stderr
    assert standin.commands() == ["version"]
    assert job.leftover_scratch() == []


def test_image_without_python_exits_69_and_cleans_up(
    make_job: JobFactory, image, standin: Standin
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("nopython")))

    result = job.run()

    assert result.returncode == 69, result.stderr
    assert standin.commands() == ["version", "create", "start", "remove"]
    assert "no python3" in result.stderr
    assert list(Path(job.paths.output_dir).iterdir()) == []
    assert job.leftover_scratch() == []


def _touch(path: Path) -> str:
    return f"sleep 0.01; touch {shlex.quote(str(path))}"


def _swap(path: Path) -> str:
    quoted = shlex.quote(str(path))
    return f"cp {quoted} {quoted}.new && printf x >>{quoted}.new && mv {quoted}.new {quoted}"


def _swap_same_bytes(path: Path) -> str:
    quoted = shlex.quote(str(path))
    return f"cp --preserve=mode,timestamps {quoted} {quoted}.new && mv {quoted}.new {quoted}"


def _rename_away_and_back(path: Path) -> str:
    quoted = shlex.quote(str(path))
    return f"sleep 0.01; mv {quoted} {quoted}.away && mv {quoted}.away {quoted}"


CHANGES = {
    "touched": _touch,
    "swapped": _swap,
    "swapped-same-bytes-and-times": _swap_same_bytes,
    "renamed-away-and-back": _rename_away_and_back,
}


@pytest.mark.parametrize("during", ["create", "start"])
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_image_changed_during_the_job_exits_74(
    make_job: JobFactory,
    image,
    standin: Standin,
    world_readable_tmp: Path,
    during: str,
    change: str,
) -> None:
    source = image("report")
    if during == "start":
        # the start hook runs in the sandbox, as the sandbox's id: let it reach the image
        shelf = world_readable_tmp / "images"
        shelf.mkdir(mode=0o777)
        shelf.chmod(0o777)
        source = source.rename(shelf / source.name)
        source.chmod(0o666)
    standin.configure(hooks={during: CHANGES[change](source)})
    job = make_job(operation="inspect_sqsh", role="client", source=str(source))

    result = job.run()

    assert result.returncode == 74, result.stderr
    expected = ["version", "create", "remove"] if during == "create" else None
    assert standin.commands() == (expected or ["version", "create", "start", "remove"])
    assert not Path(job.paths.result).exists()
    assert job.leftover_scratch() == []


@pytest.mark.parametrize("mode", ["silent", "empty", "fail-after-writing"])
def test_no_or_empty_or_failed_result_exits_76_and_leaves_no_result(
    make_job: JobFactory, image, standin: Standin, mode: str
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image(mode)))

    result = job.run()

    assert result.returncode == 76, result.stderr
    assert standin.commands() == ["version", "create", "start", "remove"]
    assert not Path(job.paths.result).exists()
    assert job.leftover_scratch() == []


# The inspection result as the image leaves it in the sandbox's output directory, seen from the
# stand-in's start hook (the unpacked root is the sandbox's data/NAME).
SANDBOX_RESULT = '"$STANDIN_ROOTFS/../../output/inspection.json"'


def test_result_replaced_by_a_symlink_exits_76(
    make_job: JobFactory, image, standin: Standin, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text('{"planted": true}')
    outside.chmod(0o644)
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("silent")))
    standin.configure(hooks={"start": f"ln -s {outside} {SANDBOX_RESULT}"})

    result = job.run()

    assert result.returncode == 76
    assert "no inspection result" in result.stderr
    assert outside.read_text() == '{"planted": true}'
    assert not Path(job.paths.result).exists()


def test_failed_start_removes_the_container_and_the_scratch(
    make_job: JobFactory, image, standin: Standin
) -> None:
    standin.configure(fail={"start": 3})
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    result = job.run()

    assert result.returncode == 76
    assert standin.commands() == ["version", "create", "start", "remove"]
    assert not Path(job.paths.result).exists()
    assert job.leftover_scratch() == []


def test_failed_create_still_removes_the_container(
    make_job: JobFactory, image, standin: Standin
) -> None:
    standin.configure(fail={"create": 1})
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    result = job.run()

    assert result.returncode == 1
    assert standin.commands() == ["version", "create", "remove"]
    assert job.leftover_scratch() == []


def test_a_directory_planted_at_the_result_still_lets_the_cleanup_finish(
    make_job: JobFactory, image, standin: Standin
) -> None:
    # The image's code owns the sandbox's output: a non-empty directory at inspection.json is
    # no result, and the EXIT trap must still remove the scratch and keep the exit code.
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("silent")))
    standin.configure(hooks={"start": f"mkdir -p {SANDBOX_RESULT}/planted"})

    result = job.run()

    assert result.returncode == 76, result.stderr
    assert standin.commands() == ["version", "create", "start", "remove"]
    assert job.leftover_scratch() == []


def test_a_symlink_swapped_in_right_after_the_open_exits_74(
    make_job: JobFactory, image, standin: Standin, tmp_path: Path
) -> None:
    # Between the symlink check and the first identity, the path becomes a symlink to the very
    # file the job opened (renamed away): descriptor and path reach one inode, but the path is
    # no longer a regular file and the job must not go on with it.
    source = image("report")
    moved = source.with_name("moved.sqsh")
    done = tmp_path / "swapped"
    stat_tool = standin.bin / "stat"
    stat_tool.write_text(
        "#!/bin/sh\n"
        # the first stat of the open image (the directory checks before it stat other paths)
        f'if [ ! -e {done} ] && [ "${{#}}" -gt 0 ] && [ "${{*%/dev/fd/9}}" != "$*" ]; then\n'
        f"    : >{done}\n"
        f"    mv {source} {moved} && ln -s {moved} {source}\n"
        "fi\n"
        'exec /usr/bin/stat "$@"\n'
    )
    stat_tool.chmod(0o755)
    job = make_job(operation="inspect_sqsh", role="client", source=str(source))

    result = job.run()

    assert done.exists() and source.is_symlink()
    assert result.returncode == 74, result.stderr
    assert standin.commands() == ["version"]
    assert job.leftover_scratch() == []
