"""The batch script's flow under bash: call order, environment, isolation (design §5)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from harness import DEFAULT_JOB_PATH, Job, JobFactory, Standin

CONTAINER = "slurm-image-{}"
NEVER_PASSED = {
    *("BASH_ENV", "ENV", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONSTARTUP"),
    *("XDG_RUNTIME_DIR", "SHELLOPTS", "ENROOT_ALLOW_SUPERUSER"),
}


def report(job: Job) -> str:
    return Path(job.paths.result).read_text()


def test_inspect_calls_version_create_start_remove_in_order(
    make_job: JobFactory, image, standin: Standin
) -> None:
    source = image("report")
    job = make_job(operation="inspect_sqsh", role="client", source=str(source))

    result = job.run()

    assert result.returncode == 0, result.stderr
    assert standin.commands() == ["version", "create", "start", "remove"]
    create, start, remove = (call["argv"] for call in standin.calls()[1:])
    name = CONTAINER.format(job.job_id)
    # a private copy of the bytes hashed, in the job's scratch (Enroot reopens by path)
    sandbox = Path(standin.calls()[1]["env"]["ENROOT_DATA_PATH"]).parent
    private = sandbox.parent / "image.sqsh"
    assert create == ["create", "-f", "--name", name, str(private)]
    # the rc the sandbox reads is a copy of the staged one, in its own directory
    assert start[:4] == ["start", "--root", "--rc", str(sandbox / "enroot.rc")]
    assert start[start.index(name) :] == [
        name,
        "--",
        "client",
        start[-2],
        "/.slurm-image/output/inspection.json",
    ]
    assert remove == ["remove", "-f", name]
    # the rc saw a literal `--` (ENROOT_LOGIN_SHELL=no), dropped it, and ran python3 -I -B
    lines = report(job).splitlines()
    assert lines[:7] == [
        "argc=6",
        "arg=-I",
        "arg=-B",
        "arg=/.slurm-image/inspect_image.py",
        "arg=client",
        f"arg={start[-2]}",
        "arg=/.slurm-image/output/inspection.json",
    ]


def test_the_digest_handed_to_the_inspector_is_the_image_sha256(
    make_job: JobFactory, image, standin: Standin
) -> None:
    import hashlib

    source = image("report")
    job = make_job(operation="inspect_sqsh", role="serving", source=str(source))

    assert job.run().returncode == 0
    start = standin.calls()[2]["argv"]
    assert start[-2] == hashlib.sha256(source.read_bytes()).hexdigest()
    # serving images get no SLURM_IMAGE_REQUIRE (a usage error for the inspector)
    assert not any(arg.startswith("SLURM_IMAGE_REQUIRE=") for arg in start)


def test_client_inspection_passes_the_required_distributions(
    make_job: JobFactory, image, standin: Standin
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))
    assert job.run().returncode == 0
    start = standin.calls()[2]["argv"]
    assert start[start.index("-e", 4) : start.index("-e", 4) + 6] == [
        "-e",
        "SHELL=/bin/sh",
        "-e",
        "PATH=/usr/bin:/bin",  # the image's own PATH (its etc/environment)
        "-e",
        "SLURM_IMAGE_REQUIRE=pip",
    ]


def test_hostile_environment_reaches_neither_the_script_tools_nor_enroot(
    make_job: JobFactory, image, standin: Standin, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    poison = tmp_path / "poison"
    poison.mkdir()
    for tool in ("enroot", "openssl", "sha256sum", "stat", "mktemp", "env", "bash", "mkdir"):
        fake = poison / tool
        fake.write_text(f"#!/bin/sh\ntouch {marks}/path-{tool}\nexit 0\n")
        fake.chmod(0o755)
    (tmp_path / "bash_env.sh").write_text(f"touch {marks}/bash-env\n")
    function = "() {{ touch {}/function-{}; }}"
    hostile = {
        "PATH": f"{poison}:/usr/bin:/bin",
        "HOME": str(tmp_path / "user-home"),
        "BASH_ENV": str(tmp_path / "bash_env.sh"),
        "ENV": str(tmp_path / "bash_env.sh"),
        "LD_PRELOAD": str(poison / "libpoison.so"),
        "LD_LIBRARY_PATH": str(poison),
        "PYTHONPATH": str(poison),
        "PYTHONSTARTUP": str(tmp_path / "bash_env.sh"),
        "TMPDIR": str(tmp_path / "user-tmp"),
        "XDG_RUNTIME_DIR": str(tmp_path / "user-run"),
        "ENROOT_DATA_PATH": str(tmp_path / "user-data"),
        "ENROOT_CONFIG_PATH": str(tmp_path / "user-config"),
        "ENROOT_MOUNT_HOME": "yes",
        "ENROOT_ALLOW_SUPERUSER": "yes",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "SHELLOPTS": "xtrace",
        "IFS": "/",
    }
    for tool in ("sha256sum", "enroot", "openssl", "stat", "mktemp", "rm", "mkdir", "exit"):
        hostile[f"BASH_FUNC_{tool}%%"] = function.format(marks, tool)
    source = image("report")
    job = make_job(operation="inspect_sqsh", role="client", source=str(source))

    result = job.run(hostile)

    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(marks)) == []
    assert standin.commands() == ["version", "create", "start", "remove"]
    for call in standin.calls():
        env = call["env"]
        leaked = {key for key in env if key.startswith("BASH_FUNC_")}
        leaked |= set(env) & NEVER_PASSED
        assert not leaked, leaked
        assert env["PATH"] == f"{standin.bin}:{DEFAULT_JOB_PATH}"
        if call["argv"][0] == "start":  # the sandbox has a home of its own
            assert env["HOME"] == str(Path(env["ENROOT_DATA_PATH"]).parent / "home")
        else:
            assert env["HOME"] == job.paths.home
        assert env["ENROOT_DATA_PATH"].startswith(str(job.scratch) + "/")
        if call["argv"][0] != "start":  # start has a configuration of its own
            assert env["ENROOT_CONFIG_PATH"] == job.paths.enroot_config
        assert env["ENROOT_MOUNT_HOME"] == "no"
        assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
        assert env["LC_ALL"] == "C"
    inside = report(job)
    for name in ("LD_PRELOAD", "BASH_ENV", "PYTHONPATH", "BASH_FUNC_"):
        assert name not in inside
    assert len(standin.event("start")["mounts"]) == 2  # no $HOME mount


def test_job_private_paths_are_0700_and_the_scratch_is_gone_afterwards(
    make_job: JobFactory, image, standin: Standin, tmp_path: Path
) -> None:
    modes = tmp_path / "modes"
    standin.configure(
        hooks={
            "create": 'for d in "$HOME" "$TMPDIR" "$ENROOT_CONFIG_PATH" "$ENROOT_CACHE_PATH" '
            '"$ENROOT_DATA_PATH" "$ENROOT_TEMP_PATH" "$ENROOT_RUNTIME_PATH" '
            '"$(dirname "$ENROOT_DATA_PATH")"; do stat -c "%a %U %n" "$d"; done >' + str(modes)
        }
    )
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    assert job.run().returncode == 0
    lines = modes.read_text().splitlines()
    assert len(lines) == 8
    for line in lines:
        mode, owner, _ = line.split(" ", 2)
        assert (mode, owner) == ("700", "root"), line
    env = standin.calls()[0]["env"]
    private = Path(env["ENROOT_DATA_PATH"]).parent
    assert private.parent == job.scratch
    assert private.name.startswith(f"slurm-image-{job.job_id}.")
    for key in ("ENROOT_CACHE_PATH", "ENROOT_DATA_PATH", "ENROOT_TEMP_PATH", "ENROOT_RUNTIME_PATH"):
        assert Path(env[key]).parent == private
    assert env["TMPDIR"] == env["ENROOT_TEMP_PATH"]
    # Enroot's temp, data (the unpacked root) and runtime are gone with the job
    assert job.leftover_scratch() == []
    for directory in (job.paths.home, job.paths.enroot_config):
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700


def test_without_local_scratch_the_nodes_tmpdir_holds_enroots_directories(
    make_job: JobFactory, image, standin: Standin, world_readable_tmp: Path
) -> None:
    node_tmp = world_readable_tmp / "node-tmp"
    node_tmp.mkdir()
    job = make_job(
        operation="inspect_sqsh", role="client", source=str(image("report")), local_scratch=False
    )

    assert job.run({"TMPDIR": str(node_tmp)}).returncode == 0
    data = Path(standin.calls()[0]["env"]["ENROOT_DATA_PATH"])
    assert data.parent.parent == node_tmp
    assert list(node_tmp.iterdir()) == []


def test_gpu_variables_are_void_and_an_image_asking_for_gpus_still_starts(
    make_job: JobFactory, image, standin: Standin
) -> None:
    # the image's /etc/environment sets NVIDIA_VISIBLE_DEVICES=all (as CUDA images do)
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    assert job.run().returncode == 0
    for call in standin.calls():
        assert call["env"]["NVIDIA_VISIBLE_DEVICES"] == "void"
        assert call["env"]["MELLANOX_VISIBLE_DEVICES"] == "void"


def test_the_job_directory_is_never_mounted(make_job: JobFactory, image, standin: Standin) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    assert job.run().returncode == 0
    mounts = standin.event("start")["mounts"]
    start = next(call for call in standin.calls() if call["argv"][0] == "start")
    sandbox = Path(start["env"]["ENROOT_DATA_PATH"]).parent
    assert sandbox.parent.parent == job.scratch
    assert [(m["source"], m["target"]) for m in mounts] == [
        (str(sandbox / "inspect_image.py"), "/.slurm-image/inspect_image.py"),
        (str(sandbox / "output"), "/.slurm-image/output"),
    ]
    assert [m["options"] for m in mounts] == [
        "x-create=file,bind,ro,nosuid,nodev,noexec",
        "x-create=dir,bind,rw,nosuid,nodev,noexec",
    ]
    # seen from inside: what of the host's job directory is visible is exactly those two
    inside = report(job).split("--- mountinfo\n")[1].split("--- ")[0]
    visible = [line.split()[3] for line in inside.splitlines()]
    assert not [root for root in visible if root.startswith(job.paths.job_dir)]
    # the sandbox's own: the unpacked root, Enroot's runtime (its copy of the rc), and those two
    enroot_own = (sandbox / "data", sandbox / "runtime")
    from_sandbox = [
        root
        for root in visible
        if Path(root).is_relative_to(sandbox)
        and not any(Path(root).is_relative_to(own) for own in enroot_own)
    ]
    assert from_sandbox == [str(sandbox / "inspect_image.py"), str(sandbox / "output")]
    assert "inspector=readonly" in report(job)
    assert "root=readonly" in report(job)


def test_site_enroot_environment_reaches_enroot(
    make_job: JobFactory, image, standin: Standin
) -> None:
    job = make_job(
        operation="inspect_sqsh",
        role="client",
        source=str(image("report")),
        environment={"ENROOT_SQUASH_OPTIONS": "-comp gzip", "ENROOT_TRANSFER_RETRIES": "3"},
    )

    assert job.run().returncode == 0
    for call in standin.calls():
        assert call["env"]["ENROOT_SQUASH_OPTIONS"] == "-comp gzip"
        assert call["env"]["ENROOT_TRANSFER_RETRIES"] == "3"


def test_default_squash_options_bound_mksquashfs_memory(
    make_job: JobFactory, image, standin: Standin
) -> None:
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    assert job.run().returncode == 0
    # 4G allocation: half of it for mksquashfs; -exit-on-error from Enroot 4.1.0 on
    assert standin.calls()[1]["env"]["ENROOT_SQUASH_OPTIONS"] == (
        "-comp lzo -noD -exit-on-error -mem 2048M"
    )


def test_enroot_and_the_image_inherit_no_descriptor_of_the_job(
    make_job: JobFactory, image, standin: Standin
) -> None:
    # The job holds the .sqsh open on fd 9. Enroot execs down to the image's shell, so an
    # inherited fd 9 would let the image's code reopen /proc/self/fd/9 for writing: the
    # inspected file, outside every mount.
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    assert job.run().returncode == 0
    calls = standin.calls()
    assert [call["argv"][0] for call in calls] == ["version", "create", "start", "remove"]
    assert {call["argv"][0]: call["fds"] for call in calls} == {
        "version": [],
        "create": [],
        "start": [],
        "remove": [],
    }


def test_the_submitters_slurm_image_settings_stay_out_of_the_job(
    make_job: JobFactory, image, standin: Standin
) -> None:
    # SLURM_* is kept for Slurm's own variables. The product's SLURM_IMAGE_* settings (a user's
    # login environment holds SLURM_IMAGE_PROFILE) share the prefix; SLURM_IMAGE_REQUIRE would
    # reach the inspector and change what a serving (usage error) or client image must hold.
    job = make_job(operation="inspect_sqsh", role="serving", source=str(image("report")))

    result = job.run(
        {
            "SLURM_IMAGE_REQUIRE": "numpy",
            "SLURM_IMAGE_PROFILE": "/home/user/slurm-image.toml",
            "SLURM_IMAGE_SUBMITTER__KIND": "rest",
        }
    )

    assert result.returncode == 0, result.stderr
    for call in standin.calls():
        assert not [key for key in call["env"] if key.startswith("SLURM_IMAGE_")]
        assert call["env"]["SLURM_JOB_ID"] == job.job_id
    assert "SLURM_IMAGE_" not in report(job)


def test_only_the_allowlisted_slurm_variables_reach_the_job(
    make_job: JobFactory, image, standin: Standin
) -> None:
    # Slurm 22.05 loads the submitter's login environment despite --export=NIL: a SLURM_JWT
    # there would otherwise reach Enroot and, through it, the image.
    job = make_job(operation="inspect_sqsh", role="client", source=str(image("report")))

    result = job.run(
        {
            "SLURM_JWT": "eyJhbGciOiJIUzI1NiJ9.secret.token",
            "SLURM_CONF": "/etc/slurm/slurm.conf",
            "SLURM_SUBMIT_HOST": "login1",
        }
    )

    assert result.returncode == 0, result.stderr
    for call in standin.calls():
        slurm = {key for key in call["env"] if key.startswith("SLURM")}
        assert slurm == {
            "SLURM_JOB_ID",
            "SLURM_RESTART_COUNT",
            "SLURM_CPUS_ON_NODE",
            "SLURM_JOB_CPUS_PER_NODE",
        }
    assert "eyJhbGciOiJIUzI1NiJ9" not in report(job)
