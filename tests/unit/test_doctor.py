"""``Doctor`` with the in-memory adapters: every check's verdict, and what the job's report means.

The fake scheduler never runs jobs: the test's ``node`` plays the compute node when the doctor
waits, writing the job's stdout into the workspace and ending the job.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from slurm_image.adapters.memory import (
    FakeClock,
    FakeFilesystems,
    FakeSubmitter,
    MemoryFilesystem,
    MemoryWorkspace,
)
from slurm_image.application.doctor import CHECKS, Doctor, DoctorReport, profile_failed
from slurm_image.domain.doctor_script import doctor_job, parse_report, render_doctor_script
from slurm_image.domain.job import JobState
from slurm_image.domain.partition import PartitionLimits
from slurm_image.domain.profile import SiteProfile, parse_profile
from slurm_image.submitters import RetryPolicy
from support import make_plan, profile_data

ROOT = "/site/ws"
DOCTOR_ID = "doctor-0123456789abcdef"
GOOD_REPORT = (
    "slurm-image: noise on stdout\n"
    "slurm-image-doctor: node=node07\n"
    "slurm-image-doctor: job_path=/opt/enroot/bin:/usr/bin:/bin\n"
    "slurm-image-doctor: enroot_version=4.1.2\n"
    "slurm-image-doctor: enroot=/opt/enroot/bin/enroot\n"
    "slurm-image-doctor: mksquashfs=/usr/bin/mksquashfs\n"
    "slurm-image-doctor: unsquashfs=/usr/bin/unsquashfs\n"
    "slurm-image-doctor: scratch=/local/scratch\n"
    "slurm-image-doctor: scratch_free_bytes=107374182400\n"
    "slurm-image-doctor: scratch_filesystem=xfs\n"
    "slurm-image-doctor: scratch_removed=ok\n"
    "slurm-image-doctor: job_uid=1000\n"
    "slurm-image-doctor: sandbox_uid=1000\n"
    "slurm-image-doctor: sandbox=ok\n"
    "slurm-image-doctor: inspection_path=overlay: fuse-overlayfs\n"
    "slurm-image-doctor: architecture=x86_64\n"
    "slurm-image-doctor: runs_aarch64=ok\n"
    "slurm-image-doctor: runs_ppc64le=binfmt_misc is disabled (/proc/sys/fs/binfmt_misc/status)\n"
)


class Site:
    def __init__(self, **image_build: object) -> None:
        data = profile_data(**image_build)
        data["workspace_root"] = ROOT
        self.profile: SiteProfile = parse_profile(data)
        self.filesystem = MemoryFilesystem()
        self.filesystem.makedirs(ROOT, mode=0o755, uid=1000)
        self.workspace = MemoryWorkspace(ROOT, self.filesystem, uid=1000)
        self.submitter = FakeSubmitter(
            partitions={"cpu"}, max_cpus_per_task=64, retry_policy=RetryPolicy.immediate()
        )
        self.clock = FakeClock()
        self.filesystems = FakeFilesystems("lustre")
        self.job = doctor_job(self.profile, DOCTOR_ID)
        self.stdout = GOOD_REPORT
        self.stderr = ""
        self.exit_code = 0
        self.runs = True
        self.seen_directory: list[str] = []

    def node(self, seconds: float) -> None:
        """Play the compute node while the doctor waits."""
        self.clock.advance(timedelta(seconds=seconds))
        if not self.runs:
            return
        for job_id, job in self.submitter.jobs.items():
            if job.state.is_terminal:
                continue
            self.seen_directory = self.workspace.list_directory(self.job.job_dir)
            self.filesystem.write(self.job.stdout(job_id), self.stdout.encode(), uid=1000)
            self.filesystem.write(self.job.stderr(job_id), self.stderr.encode(), uid=1000)
            self.submitter.start(job_id)
            self.submitter.finish(job_id, self.exit_code)

    def run(self, timeout_s: float = 60) -> DoctorReport:
        doctor = Doctor(
            workspace=self.workspace,
            submitter=self.submitter,
            filesystems=self.filesystems,
            clock=self.clock,
            sleep=self.node,
        )
        return doctor(self.profile, "site.toml", timeout_s=timeout_s, doctor_id=DOCTOR_ID)


def verdicts(report: DoctorReport) -> dict[str, bool]:
    return {check.name: check.ok for check in report.checks}


def detail(report: DoctorReport, name: str) -> str:
    return next(check.detail for check in report.checks if check.name == name)


def test_a_ready_site_passes_every_check_in_order() -> None:
    site = Site(cpus_per_task=4, memory="16G", time_limit="1:00:00")
    report = site.run()
    assert [check.name for check in report.checks] == list(CHECKS)
    assert report.ok, report.checks
    assert report.enroot_version == "4.1.2"
    assert detail(report, "submitter") == "fake: fake controller UP"
    assert detail(report, "partition") == (
        "cpu is UP; cpus_per_task 4, memory 16G, time_limit 1:00:00 fit"
    )
    assert detail(report, "workspace") == f"{ROOT} is writable, on lustre"
    assert detail(report, "job") == "job 1 ran on node07 through the job's isolation"
    assert detail(report, "enroot") == "Enroot 4.1.2 at /opt/enroot/bin/enroot: import and inspect"
    assert detail(report, "local_scratch") == (
        "/local/scratch on xfs, 100.0 GiB free; the job's scratch removed after it"
    )
    assert detail(report, "sandbox") == (
        "user, PID and network namespaces of its own; this job ran as uid 1000; the image runs as"
        " that uid (root's jobs: uid 65534, never root)"
    )
    assert detail(report, "architecture") == (
        "x86_64 node; runs aarch64 through binfmt_misc; builds for x86_64 natively"
    )
    assert (report.architecture, report.runs_architectures) == ("x86_64", ("aarch64",))
    assert report.as_dict()["architecture"] == "x86_64"
    assert report.as_dict()["runs_architectures"] == ["aarch64"]


def test_a_profile_arch_the_node_runs_through_binfmt_misc_passes() -> None:
    report = Site(arch="aarch64").run()
    assert report.ok, report.checks
    assert detail(report, "architecture").endswith("builds for aarch64 through binfmt_misc")


def test_a_profile_arch_the_node_cannot_run_fails_with_why_and_what_to_do() -> None:
    from slurm_image.cli.doctor_command import exit_code

    report = Site(arch="ppc64le").run()
    assert report.first_failure is not None and report.first_failure.name == "architecture"
    text = detail(report, "architecture")
    assert "image_build.arch ppc64le cannot run here: binfmt_misc is disabled" in text
    assert "qemu-user-static" in text and "partition of ppc64le nodes" in text
    assert exit_code(report) == 4


def test_a_node_of_an_architecture_the_job_cannot_import_for_fails() -> None:
    site = Site()
    site.stdout = GOOD_REPORT.replace("architecture=x86_64", "architecture=riscv64")
    report = site.run()
    assert not verdicts(report)["architecture"]
    assert "riscv64 is none the job imports for (aarch64, ppc64le, x86_64)" in detail(
        report, "architecture"
    )
    assert report.runs_architectures == ("aarch64",)


def test_a_node_that_reports_no_architecture_fails_the_check() -> None:
    site = Site()
    site.stdout = GOOD_REPORT.replace("slurm-image-doctor: architecture=x86_64\n", "")
    report = site.run()
    assert detail(report, "architecture") == "the node did not report its architecture"
    assert report.as_dict()["architecture"] is None


def test_a_root_job_reports_that_the_image_runs_as_the_unprivileged_id() -> None:
    site = Site()
    site.stdout = GOOD_REPORT.replace("job_uid=1000", "job_uid=0").replace(
        "sandbox_uid=1000", "sandbox_uid=65534"
    )
    report = site.run()
    assert report.ok, report.checks
    assert detail(report, "sandbox").endswith(
        "this job ran as uid 0; the image runs as uid 65534, never as root"
    )


@pytest.mark.parametrize(
    "line",
    [
        "sandbox=unshare: unrecognized option '--kill-child'",
        "sandbox=uid 65534 cannot walk to the scratch /local/scratch/slurm-image-1.x",
        "nothing",
    ],
)
def test_a_node_that_cannot_sandbox_the_image_fails_the_sandbox_check(line: str) -> None:
    site = Site()
    site.stdout = GOOD_REPORT.replace("sandbox=ok", line)
    report = site.run()
    assert not verdicts(report)["sandbox"]
    assert report.first_failure is not None and report.first_failure.name == "sandbox"
    found = line.partition("=")[2] or "no report"
    assert detail(report, "sandbox") == f"the image cannot run in a sandbox here: {found}"


def test_a_node_with_the_overlay_tools_reports_the_overlay_path() -> None:
    report = Site().run()
    assert verdicts(report)["inspection_path"]
    assert detail(report, "inspection_path") == "overlay above the mounted image (fuse-overlayfs)"


@pytest.mark.parametrize(
    "reason",
    ["root's job (its FUSE daemons would run as host root)", "no squashfuse on /usr/bin:/bin"],
)
def test_a_node_that_unpacks_says_why_and_still_passes(reason: str) -> None:
    site = Site()
    site.stdout = GOOD_REPORT.replace("overlay: fuse-overlayfs", f"unpacked: {reason}")
    report = site.run()
    assert report.ok, report.checks
    assert detail(report, "inspection_path") == f"unpacked copy: {reason}"


def test_a_node_that_says_nothing_of_the_inspection_path_fails_that_check() -> None:
    site = Site()
    site.stdout = GOOD_REPORT.replace(
        "slurm-image-doctor: inspection_path=overlay: fuse-overlayfs\n", ""
    )
    report = site.run()
    assert not verdicts(report)["inspection_path"]
    assert detail(report, "inspection_path") == "the node did not say how it inspects: no report"


def test_the_job_is_the_rendered_doctor_script_with_a_tiny_spec() -> None:
    site = Site()
    report = site.run()
    (job,) = site.submitter.jobs.values()
    assert job.script == render_doctor_script(site.job, site.profile).encode()
    assert (job.spec.cpus_per_task, job.spec.memory, job.spec.partition) == (1, "256M", "cpu")
    assert job.spec.comment == f"slurm-image:{DOCTOR_ID}"
    assert report.job_id == "1"
    assert site.seen_directory == ["probe"]  # the job ran in the doctor's own directory...
    assert not site.workspace.exists(site.job.job_dir)  # ...which is gone afterwards


def test_an_unreachable_scheduler_fails_and_nothing_is_submitted() -> None:
    site = Site()
    site.submitter.controller_up = False
    report = site.run()
    assert verdicts(report) == {
        "profile": True,
        "submitter": False,
        "partition": False,
        "workspace": True,
        "layer_cache": True,
        "job": False,
        "enroot": False,
        "squashfs_tools": False,
        "importer": False,
        "local_scratch": False,
        "sandbox": False,
        "inspection_path": False,
        "architecture": False,
    }
    assert "DOWN" in detail(report, "submitter")
    assert detail(report, "partition") == "not run: the submitter is not reachable"
    assert site.submitter.jobs == {}
    assert report.first_failure is not None and report.first_failure.name == "submitter"


def test_a_missing_partition_is_named_and_no_job_is_submitted() -> None:
    site = Site(partition="gpu")
    report = site.run()
    assert detail(report, "partition") == "gpu: the scheduler has no such partition"
    assert not verdicts(report)["job"]
    assert site.submitter.jobs == {}


def test_every_limit_the_profile_breaks_is_named() -> None:
    site = Site(cpus_per_task=48, memory="300G", time_limit="72:00:00")
    site.submitter.set_partition(
        PartitionLimits(
            name="cpu", state="UP", max_time_minutes=2880, node_cpus=32, node_memory_mib=256000
        )
    )
    report = site.run()
    assert detail(report, "partition") == (
        "cpu: cpus_per_task 48 exceeds the node limit of 32;"
        " memory 300G (307200 MiB) exceeds the node limit of 256000 MiB;"
        " time_limit 72:00:00 exceeds MaxTime 48:00:00"
    )


def test_a_workspace_root_that_is_not_writable_fails_and_no_job_runs() -> None:
    site = Site()
    site.filesystem.chmod(ROOT, 0o555)
    report = site.run()
    assert not verdicts(report)["workspace"]
    assert "not writable" in detail(report, "workspace")
    assert detail(report, "job") == "not run: the workspace root is not writable"
    assert site.submitter.jobs == {}


def test_a_failed_job_reports_its_state_exit_code_and_last_error_line() -> None:
    site = Site()
    site.exit_code = 64
    site.stderr = "slurm-image: error: SLURM_JOB_ID is missing or not a job id (exit 64)\n"
    report = site.run()
    assert detail(report, "job") == (
        "job 1 FAILED, exit 64: slurm-image: error: SLURM_JOB_ID is missing or not a job id"
        " (exit 64)"
    )
    assert detail(report, "enroot") == "not run: the doctor's job did not report"
    assert report.enroot_version is None


def test_a_job_that_never_starts_is_cancelled_at_the_timeout() -> None:
    site = Site()
    site.runs = False
    report = site.run(timeout_s=30)
    assert detail(report, "job") == "job 1 still PENDING after 30s; cancelled"
    assert site.submitter.job("1").state is JobState.CANCELLED
    assert not site.workspace.exists(site.job.job_dir)


def test_a_job_that_cannot_be_observed_is_cancelled() -> None:
    site = Site()
    site.runs = False
    site.submitter.fail_next("permanent", operation="states")
    report = site.run()
    assert detail(report, "job") == "job 1: submitter: request refused (injected); cancelled"
    assert site.submitter.job("1").state is JobState.CANCELLED


@pytest.mark.parametrize(
    ("version", "ok", "words"),
    [
        ("4.0.0", True, "import and inspect"),
        ("3.5.0", True, "import and inspect"),
        ("3.4.9", False, "import only; import needs 3.4.1, inspect 3.5.0"),
        ("3.4.0", False, "too old; import needs 3.4.1, inspect 3.5.0"),
        ("", False, "printed nothing"),
        ("garbage", False, "printed 'garbage'"),
    ],
)
def test_the_enroot_version_is_judged_by_the_jobs_own_minimums(
    version: str, ok: bool, words: str
) -> None:
    site = Site()
    site.stdout = GOOD_REPORT.replace("enroot_version=4.1.2", f"enroot_version={version}")
    report = site.run()
    assert verdicts(report)["enroot"] is ok
    assert words in detail(report, "enroot")
    assert (report.enroot_version == version) is (version[:1].isdigit())


def test_missing_squashfs_tools_and_a_network_scratch_fail() -> None:
    site = Site()
    site.stdout = (
        GOOD_REPORT.replace("mksquashfs=/usr/bin/mksquashfs", "mksquashfs=")
        .replace("unsquashfs=/usr/bin/unsquashfs", "unsquashfs=")
        .replace("scratch_filesystem=xfs", "scratch_filesystem=nfs")
    )
    report = site.run()
    assert detail(report, "squashfs_tools") == (
        "mksquashfs and unsquashfs not found on job_path /opt/enroot/bin:/usr/bin:/bin"
    )
    assert not verdicts(report)["local_scratch"]
    assert "node-local" in detail(report, "local_scratch")


def test_the_report_reader_takes_only_its_own_lines_and_known_keys() -> None:
    report = parse_report(
        "slurm-image-doctor: enroot_version=4.1.2\n"
        "slurm-image-doctor: evil=1\n"
        "enroot_version=9.9.9\n"
        "slurm-image-doctor: scratch_free_bytes=-5\n"
        "slurm-image-doctor: node\n"
    )
    assert report.enroot_version == "4.1.2"
    assert report.scratch_free_bytes is None
    assert report.node == ""


def test_the_report_reader_keeps_the_verdicts_on_other_architectures_only() -> None:
    report = parse_report(
        "slurm-image-doctor: architecture=aarch64\n"
        "slurm-image-doctor: runs_aarch64=ok\n"
        "slurm-image-doctor: runs_x86_64=ok\n"
        "slurm-image-doctor: runs_ppc64le=no enabled binfmt_misc handler with flag F\n"
        "slurm-image-doctor: runs_riscv64=ok\n"
    )
    assert report.architecture == "aarch64"
    assert report.foreign == {
        "x86_64": "ok",
        "ppc64le": "no enabled binfmt_misc handler with flag F",
    }
    assert report.runs_architectures == ("x86_64",)


def test_an_unreadable_profile_fails_every_check() -> None:
    report = profile_failed("profile: no profile file at /nowhere.toml")
    assert [check.name for check in report.checks] == list(CHECKS)
    assert not any(check.ok for check in report.checks)
    assert report.checks[0].detail == "profile: no profile file at /nowhere.toml"


def test_the_doctor_runs_the_lifecycle_jobs_own_steps() -> None:
    """Its helpers, job checks and isolation are the lifecycle job's own steps, by name."""
    from slurm_image.domain import job_steps
    from slurm_image.domain.script import render_script

    helpers = job_steps.step("helpers")
    assert helpers.startswith("die() {") and "# 1. An attempt directory" not in helpers
    profile = parse_profile(profile_data())
    script = render_doctor_script(doctor_job(profile, DOCTOR_ID), profile)
    lifecycle = render_script(make_plan())
    for name in (
        "helpers",
        "01b-directory-rules",
        "04-scratch",
        "05b-sandbox",
        "architecture-rules",
    ):
        assert job_steps.step(name) in script
        assert job_steps.step(name) in lifecycle
    assert "images/.tmp" not in job_steps.step("doctor-directories")
    with pytest.raises(ValueError):
        job_steps.step("a step the renderer does not have")


# -- the layer cache (README, "The layer cache") ------------------------------------------

CACHE = f"{ROOT}/images/layer-cache"


def with_cache(site: Site, **enroot: object) -> Site:
    data = site.profile.model_dump(mode="json")
    data["enroot"].update(enroot)
    site.profile = parse_profile(data)
    return site


def test_the_layer_cache_not_made_yet_passes_naming_its_path_and_bound() -> None:
    report = Site().run()
    assert verdicts(report)["layer_cache"]
    assert detail(report, "layer_cache") == (
        f"{CACHE}: not here (yet); the first import creates it 0700 (gc bounds it to 100.0 GiB)"
    )


def test_a_layer_cache_of_the_users_own_passes_with_what_it_holds() -> None:
    site = with_cache(Site(), layer_cache_max="2G")
    site.filesystem.makedirs(CACHE, mode=0o700, uid=1000)
    site.filesystem.write(f"{CACHE}/{'a' * 64}", b"x" * 1024, uid=1000)
    site.filesystem.write(f"{CACHE}/notes", b"x" * 4096, uid=1000)
    report = site.run()
    assert detail(report, "layer_cache") == (
        f"{CACHE}: yours alone; 1 blobs, 0.0 GiB of 2.0 GiB (layer_cache_max)"
    )


@pytest.mark.parametrize(
    ("owner", "mode", "problem"),
    [
        (1000, 0o1770, "is writable by group or others, who could plant a layer in it"),
        (1000, 0o777, "is writable by group or others without the sticky bit"),
        (4242, 0o700, "is owned by uid 4242, not by uid 1000"),
    ],
)
def test_a_layer_cache_another_user_could_change_fails_and_exits_2(
    owner: int, mode: int, problem: str
) -> None:
    from slurm_image.cli.doctor_command import exit_code

    site = Site()
    site.filesystem.makedirs(CACHE, mode=0o700, uid=1000)
    site.filesystem.chown(CACHE, owner)
    site.filesystem.chmod(CACHE, mode)
    report = site.run()
    assert not verdicts(report)["layer_cache"]
    assert detail(report, "layer_cache") == (
        f"{CACHE}: refused by the import job: {CACHE} {problem}"
    )
    assert report.first_failure is not None and report.first_failure.name == "layer_cache"
    assert exit_code(report) == 2


def test_a_layer_cache_turned_off_passes_and_says_so() -> None:
    report = with_cache(Site(), layer_cache=False).run()
    assert detail(report, "layer_cache") == "off: every import downloads every layer"


STREAM_TOOLS_REPORT = GOOD_REPORT + (
    "slurm-image-doctor: tar2sqfs=/usr/bin/tar2sqfs\nslurm-image-doctor: python3=/usr/bin/python3\n"
)


def test_enroot_imports_by_default_and_the_doctor_says_so() -> None:
    site = Site()
    site.stdout = STREAM_TOOLS_REPORT
    report = site.run()
    assert report.ok, report.checks
    assert detail(report, "importer") == (
        "Enroot's import (the default); tar2sqfs at /usr/bin/tar2sqfs on the node"
    )


def test_the_stream_importer_passes_where_the_node_has_its_programs() -> None:
    site = Site(importer="stream")
    site.stdout = STREAM_TOOLS_REPORT
    report = site.run()
    assert report.ok, report.checks
    assert detail(report, "importer") == (
        "the stream importer (the profile's image_build.importer): merge_layers.py with"
        " /usr/bin/python3 into /usr/bin/tar2sqfs"
    )


def test_the_stream_importer_fails_where_the_node_has_no_tar2sqfs() -> None:
    site = Site(importer="stream")
    site.stdout = GOOD_REPORT + "slurm-image-doctor: python3=/usr/bin/python3\n"
    report = site.run()
    assert not report.ok
    assert [name for name, ok in verdicts(report).items() if not ok] == ["importer"]
    assert detail(report, "importer") == (
        "the stream importer (the profile's image_build.importer), but tar2sqfs not found on"
        " job_path /opt/enroot/bin:/usr/bin:/bin: its imports would exit 85"
    )
