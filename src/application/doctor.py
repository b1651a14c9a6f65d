"""``Doctor``: is this site ready to build images? One check after another, each with a verdict.

The checks, in order: ``profile`` (given by the caller, who read it), ``submitter`` (a ping
through the configured adapter), ``partition`` (exists, is UP, and the profile's cpus, memory and
time fit its limits), ``workspace`` (the root is writable, and which filesystem holds it), then a
tiny job through the same isolation as real jobs: ``job`` (it ran), ``enroot`` (the compute
node's version), ``squashfs_tools`` (``mksquashfs`` and ``unsquashfs`` found on ``job_path``),
``importer`` (the profile's ``image_build.importer``, and for ``stream`` python3 and tar2sqfs),
``local_scratch`` (where Enroot's scratch goes, its filesystem and free space, and whether the
job's scratch was gone after it), ``sandbox`` (the image can run in user, PID and network
namespaces of its own, as which host id: never root) and
``architecture`` (the node's, the others it runs through binfmt_misc, and whether it runs the
profile's ``image_build.arch``). A check that cannot run because an earlier one failed is
reported as failed, saying which. A profile with a ``[policy]`` table also gets ``policy``,
after ``layer_cache``: its allowed registries, whether a signature is required, and each key's
fingerprint, or why the key file cannot be used (docs/design.md, "Image policy and
signatures"); then ``stable_paths``: whether each alias's stable path names its current image.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slurm_image.application.catalog_reader import StablePathsChecked
from slurm_image.domain import layer_cache
from slurm_image.domain.architecture import ARCHITECTURES
from slurm_image.domain.doctor_script import (
    DOCTOR_ID_PREFIX,
    NETWORK_FILESYSTEMS,
    DoctorJob,
    NodeReport,
    doctor_job,
    enroot_version_tuple,
    minimum_enroot,
    parse_report,
    render_doctor_script,
)
from slurm_image.domain.errors import DomainError, InvalidPath
from slurm_image.domain.identity import FileIdentity
from slurm_image.domain.job import JobState, JobStatus
from slurm_image.domain.partition import fit_problems
from slurm_image.domain.policy import Policy
from slurm_image.domain.profile import DEFAULT_IMPORTER, STREAM_TOOLS, SiteProfile
from slurm_image.domain.script import SANDBOX_ID
from slurm_image.domain.signatures import KEY_MAX_BYTES, load_public_key
from slurm_image.ports.clock import Clock
from slurm_image.ports.filesystem import FilesystemError, Filesystems
from slurm_image.ports.signatures import KeyFileError, Signatures
from slurm_image.ports.submitter import BatchSubmitter, SubmitterError
from slurm_image.ports.workspace import NotFound, Workspace, WorkspaceError

_log = logging.getLogger(__name__)

REPORT_MAX_BYTES = 64 * 1024
DEFAULT_TIMEOUT_S = 300.0

PROFILE = "profile"
SUBMITTER = "submitter"
PARTITION = "partition"
WORKSPACE = "workspace"
LAYER_CACHE = "layer_cache"
JOB = "job"
ENROOT = "enroot"
SQUASHFS_TOOLS = "squashfs_tools"
IMPORTER = "importer"
LOCAL_SCRATCH = "local_scratch"
SANDBOX = "sandbox"
INSPECTION_PATH = "inspection_path"
ARCHITECTURE = "architecture"
POLICY = "policy"
"""Reported only for a profile with a ``[policy]`` table, so it is not in ``CHECKS``."""
STABLE_PATHS = "stable_paths"
"""Reported when the doctor is given the catalog to read (the command line's always is)."""
CHECKS = (
    PROFILE,
    SUBMITTER,
    PARTITION,
    WORKSPACE,
    LAYER_CACHE,
    JOB,
    ENROOT,
    SQUASHFS_TOOLS,
    IMPORTER,
    LOCAL_SCRATCH,
    SANDBOX,
    INSPECTION_PATH,
    ARCHITECTURE,
)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True)
class DoctorReport:
    checks: tuple[Check, ...]
    enroot_version: str | None = None
    job_id: str | None = None
    architecture: str | None = None
    """The compute node's (``uname -m``), when its job reported."""
    runs_architectures: tuple[str, ...] = ()
    """The other architectures the node runs (binfmt_misc handlers with flag F)."""

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def first_failure(self) -> Check | None:
        return next((check for check in self.checks if not check.ok), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [check.as_dict() for check in self.checks],
            "enroot_version": self.enroot_version,
            "job_id": self.job_id,
            "architecture": self.architecture,
            "runs_architectures": list(self.runs_architectures),
        }


def profile_failed(reason: str) -> DoctorReport:
    """The report when the profile itself cannot be read: nothing else can be checked."""
    checks = [Check(PROFILE, False, reason)]
    checks += [Check(name, False, "not run: no usable profile") for name in CHECKS[1:]]
    return DoctorReport(tuple(checks))


def _size(count: int) -> str:
    return f"{count / 2**30:.1f} GiB"


def _explain(error: BaseException) -> str:
    field_name = getattr(error, "field", None)
    reason = getattr(error, "reason", None) or getattr(error, "rule", None) or str(error)
    text = f"{field_name}: {reason}" if field_name else str(reason)
    return " ".join(text.split())


@dataclass
class _Run:
    """What the checks found so far."""

    checks: list[Check] = field(default_factory=list)
    enroot_version: str | None = None
    job_id: str | None = None
    architecture: str | None = None
    runs_architectures: tuple[str, ...] = ()

    def add(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append(Check(name, ok, detail))
        return ok

    def skip(self, names: tuple[str, ...], because: str) -> None:
        for name in names:
            self.add(name, False, f"not run: {because}")


class Doctor:
    """Run every check against one profile; never raises for what it checks."""

    def __init__(
        self,
        *,
        workspace: Workspace,
        submitter: BatchSubmitter,
        filesystems: Filesystems,
        clock: Clock,
        sleep: Callable[[float], None] = time.sleep,
        poll_s: float = 1.0,
        home: str | None = None,
        signatures: Signatures | None = None,
        stable_paths: Callable[[], StablePathsChecked] | None = None,
    ) -> None:
        self._home = home
        self._stable_paths = stable_paths
        self._signatures = signatures
        self._workspace = workspace
        self._submitter = submitter
        self._filesystems = filesystems
        self._clock = clock
        self._sleep = sleep
        self._poll_s = poll_s

    def __call__(
        self,
        profile: SiteProfile,
        profile_detail: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        doctor_id: str | None = None,
    ) -> DoctorReport:
        run = _Run()
        run.add(PROFILE, True, profile_detail)
        job = doctor_job(profile, doctor_id or f"{DOCTOR_ID_PREFIX}{uuid.uuid4().hex}")
        reachable = self._check_submitter(run)
        fits = reachable and self._check_partition(run, profile, job)
        if not reachable:
            run.skip((PARTITION,), "the submitter is not reachable")
        directory = self._check_workspace(run, profile, job)
        self._check_layer_cache(run, profile)
        if profile.policy is not None:
            self._check_policy(run, profile.policy)
        if self._stable_paths is not None:
            self._check_stable_paths(run, self._stable_paths)
        node_checks = CHECKS[CHECKS.index(JOB) :]
        if directory is None:
            run.skip(node_checks, "the workspace root is not writable")
        elif not fits:
            run.skip(node_checks, f"the {SUBMITTER} or {PARTITION} check failed")
        else:
            report = self._run_job(run, profile, job, timeout_s)
            if report is None:
                run.skip(node_checks[1:], "the doctor's job did not report")
            else:
                self._judge_node(run, report, profile.image_build.importer)
                _judge_architecture(run, report, profile.image_build.arch)
        if directory is not None:
            self._remove(job, directory)
        return DoctorReport(
            tuple(run.checks),
            run.enroot_version,
            run.job_id,
            run.architecture,
            run.runs_architectures,
        )

    # -- the login node's checks ----------------------------------------------------------

    def _check_submitter(self, run: _Run) -> bool:
        try:
            answer = self._submitter.ping()
        except SubmitterError as error:
            return run.add(SUBMITTER, False, f"{self._submitter.name}: {_explain(error)}")
        return run.add(SUBMITTER, True, f"{self._submitter.name}: {answer}")

    def _check_partition(self, run: _Run, profile: SiteProfile, job: DoctorJob) -> bool:
        build = profile.image_build
        try:
            limits = self._submitter.partition(build.partition)
        except SubmitterError as error:
            return run.add(PARTITION, False, f"{build.partition}: {_explain(error)}")
        if limits is None:
            return run.add(
                PARTITION, False, f"{build.partition}: the scheduler has no such partition"
            )
        wanted = job.spec.model_copy(
            update={
                "cpus_per_task": build.cpus_per_task,
                "memory": build.memory,
                "time_limit": build.time_limit,
            }
        )
        problems = fit_problems(wanted, limits)
        request = (
            f"cpus_per_task {build.cpus_per_task}, memory {build.memory},"
            f" time_limit {build.time_limit}"
        )
        if problems:
            return run.add(PARTITION, False, f"{build.partition}: " + "; ".join(problems))
        return run.add(PARTITION, True, f"{build.partition} is {limits.state}; {request} fit")

    def _check_workspace(
        self, run: _Run, profile: SiteProfile, job: DoctorJob
    ) -> FileIdentity | None:
        root = profile.workspace_root
        try:
            kind = self._filesystems.type_name(root)
        except FilesystemError as error:
            _log.info("cannot tell the filesystem of %s: %s", root, _explain(error))
            kind = "an unknown filesystem"
        try:
            directory = self._workspace.create_directory(job.job_dir, parents=True)
        except InvalidPath as error:  # the root, or its images/, is not set up for this user
            run.add(WORKSPACE, False, f"{root} on {kind}: {error.rule}")
            return None
        except WorkspaceError as error:
            run.add(WORKSPACE, False, f"{root} on {kind}: not writable: {_explain(error)}")
            return None
        try:
            self._workspace.write_new(
                f"{job.job_dir}/probe", b"slurm-image doctor\n", mode=0o600, within=directory
            )
        except WorkspaceError as error:
            run.add(WORKSPACE, False, f"{root} on {kind}: not writable: {_explain(error)}")
            self._remove(job, directory)
            return None
        run.add(WORKSPACE, True, f"{root} is writable, on {kind}")
        return directory

    def _check_layer_cache(self, run: _Run, profile: SiteProfile) -> bool:
        """The layer cache as the import job will check it (README, "The layer cache")."""
        enroot = profile.enroot
        try:
            path = layer_cache.cache_path(enroot.layer_cache, profile.workspace_root, self._home)
        except DomainError as error:
            return run.add(LAYER_CACHE, False, f"{error.field}: {error.rule}")
        if path is None:
            return run.add(LAYER_CACHE, True, "off: every import downloads every layer")
        problem = self._workspace.cache_problem(path)
        if problem is not None:
            return run.add(LAYER_CACHE, False, f"{path}: refused by the import job: {problem}")
        bound = _size(enroot.cache_max_bytes)
        try:
            entries = self._workspace.cache_entries(path)
        except NotFound:
            return run.add(
                LAYER_CACHE,
                True,
                f"{path}: not here (yet); the first import creates it 0700 (gc bounds it to"
                f" {bound})",
            )
        except WorkspaceError as error:
            return run.add(LAYER_CACHE, False, f"{path}: {_explain(error)}")
        blobs = [e for e in entries if e.regular and layer_cache.BLOB_NAME.fullmatch(e.name)]
        held = _size(sum(entry.size for entry in blobs))
        return run.add(
            LAYER_CACHE,
            True,
            f"{path}: yours alone; {len(blobs)} blobs, {held} of {bound} (layer_cache_max)",
        )

    @staticmethod
    def _check_stable_paths(run: _Run, checked: Callable[[], StablePathsChecked]) -> bool:
        """Each alias's stable path (``path NAME``, ``srun --container-image``) names its
        current image, for the aliases this user sees."""
        try:
            found = checked()
        except (DomainError, WorkspaceError) as error:
            return run.add(STABLE_PATHS, False, f"the catalog cannot be read: {_explain(error)}")
        if not found.aliases:
            return run.add(STABLE_PATHS, True, "no alias is published for you to see yet")
        if not found.wrong:
            return run.add(
                STABLE_PATHS,
                True,
                f"the stable paths of the {found.aliases} aliases you see name their images",
            )
        more = f" and {len(found.wrong) - 1} more" if len(found.wrong) > 1 else ""
        return run.add(
            STABLE_PATHS,
            False,
            f"{found.wrong[0]}{more}: missing or naming another image than the alias's"
            " (the store's owner repairs them with slurm-image gc; meanwhile, path --pinned)",
        )

    def _check_policy(self, run: _Run, policy: Policy) -> bool:
        """The image policy as an import will apply it: every key file read under the key
        rules and parsed, each named by its fingerprint or by what is wrong with it."""
        registries = ", ".join(policy.allowed_registries) or "any"
        required = "required" if policy.require_signature else "not required"
        found: list[str] = []
        ok = True
        for path in policy.keys:
            if self._signatures is None:
                found.append(f"{path}: not checked here")
                ok = False
                continue
            try:
                key = load_public_key(
                    self._signatures.read_key_file(path, max_bytes=KEY_MAX_BYTES), path
                )
            except (KeyFileError, DomainError) as error:
                found.append(f"{path}: {error.rule}")
                ok = False
                continue
            found.append(f"{path}: {key.fingerprint} ({key.algorithm}), readable and safe")
        keys = "; ".join(found) or "none"
        return run.add(
            POLICY,
            ok,
            f"registries: {registries}; signature {required}; keys: {keys}",
        )

    def _remove(self, job: DoctorJob, directory: FileIdentity) -> None:
        try:
            self._workspace.remove_tree(job.job_dir, expected=directory)
        except WorkspaceError as error:
            _log.warning("could not remove %s: %s", job.job_dir, _explain(error))

    # -- the compute node's checks --------------------------------------------------------

    def _run_job(
        self, run: _Run, profile: SiteProfile, job: DoctorJob, timeout_s: float
    ) -> NodeReport | None:
        script = render_doctor_script(job, profile).encode("utf-8")
        try:
            job_id = self._submitter.submit(script, job.spec)
        except SubmitterError as error:
            run.add(JOB, False, f"not submitted: {_explain(error)}")
            return None
        run.job_id = job_id
        try:
            status = self._wait(job_id, timeout_s)
        except SubmitterError as error:
            self._cancel(job_id)
            run.add(JOB, False, f"job {job_id}: {_explain(error)}; cancelled")
            return None
        if status is None or not status.state.is_terminal:
            state = status.state.value if status is not None else "unknown"
            self._cancel(job_id)
            run.add(JOB, False, f"job {job_id} still {state} after {timeout_s:g}s; cancelled")
            return None
        stdout = self._read(job.stdout(job_id))
        if status.state is not JobState.COMPLETED:
            errors = self._read(job.stderr(job_id)).strip().splitlines()
            last = f": {errors[-1][:300]}" if errors else ""
            run.add(
                JOB,
                False,
                f"job {job_id} {status.state.value}, exit {status.exit_code}{last}",
            )
            return None
        report = parse_report(stdout)
        node = f" on {report.node}" if report.node else ""
        run.add(JOB, True, f"job {job_id} ran{node} through the job's isolation")
        return report

    def _wait(self, job_id: str, timeout_s: float) -> JobStatus | None:
        start = self._clock.now()
        status: JobStatus | None = None
        while True:
            status = self._submitter.states([job_id]).get(job_id, status)
            if status is not None and status.state.is_terminal:
                return status
            if (self._clock.now() - start).total_seconds() >= timeout_s:
                return status
            self._sleep(self._poll_s)

    def _cancel(self, job_id: str) -> None:
        try:
            self._submitter.cancel(job_id)
        except SubmitterError as error:
            _log.warning("could not cancel the doctor's job %s: %s", job_id, _explain(error))

    def _read(self, path: str) -> str:
        try:
            read = self._workspace.read_verified(path, max_bytes=REPORT_MAX_BYTES)
        except WorkspaceError as error:
            _log.warning("could not read %s: %s", path, _explain(error))
            return ""
        return read.data.decode("utf-8", "replace")

    def _judge_node(self, run: _Run, report: NodeReport, importer: str | None) -> None:
        version = enroot_version_tuple(report.enroot_version)
        if version is None:
            found = repr(report.enroot_version) if report.enroot_version else "nothing"
            run.add(ENROOT, False, f"enroot version printed {found} (job_path {report.job_path})")
        else:
            run.enroot_version = report.enroot_version
            importing, inspecting = minimum_enroot("import_oci"), minimum_enroot("inspect_sqsh")
            where = f"Enroot {report.enroot_version} at {report.enroot}"
            needs = f"import needs {_dotted(importing)}, inspect {_dotted(inspecting)}"
            if version >= importing and version >= inspecting:
                run.add(ENROOT, True, f"{where}: import and inspect")
            elif version >= importing:
                run.add(ENROOT, False, f"{where}: import only; {needs}")
            elif version >= inspecting:
                run.add(ENROOT, False, f"{where}: inspect only; {needs}")
            else:
                run.add(ENROOT, False, f"{where}: too old; {needs}")
        missing = [tool for tool in ("mksquashfs", "unsquashfs") if not getattr(report, tool)]
        if missing:
            run.add(
                SQUASHFS_TOOLS,
                False,
                f"{' and '.join(missing)} not found on job_path {report.job_path}",
            )
        else:
            run.add(SQUASHFS_TOOLS, True, f"{report.mksquashfs}, {report.unsquashfs}")
        _judge_importer(run, report, importer)
        if report.scratch_free_bytes is None:
            run.add(LOCAL_SCRATCH, False, f"cannot tell the free space of {report.scratch!r}")
        elif report.scratch_filesystem.lower() in NETWORK_FILESYSTEMS:
            run.add(
                LOCAL_SCRATCH,
                False,
                f"{report.scratch} is on {report.scratch_filesystem}: Enroot's scratch must be"
                " node-local (set image_build.local_scratch)",
            )
        elif report.scratch_removed != "ok":
            found = report.scratch_removed or "no report"
            run.add(
                LOCAL_SCRATCH,
                False,
                f"the job's scratch in {report.scratch} was not removed after it: {found}",
            )
        else:
            run.add(
                LOCAL_SCRATCH,
                True,
                f"{report.scratch} on {report.scratch_filesystem},"
                f" {_size(report.scratch_free_bytes)} free; the job's scratch removed after it",
            )
        _judge_sandbox(run, report)
        _judge_inspection_path(run, report)


def _judge_importer(run: _Run, report: NodeReport, importer: str | None) -> None:
    """Which importer the profile's jobs use and why, and whether the node has what the stream
    importer runs."""
    why = "the profile's image_build.importer" if importer else "the default"
    missing = [tool for tool in STREAM_TOOLS if not getattr(report, tool)]
    if (importer or DEFAULT_IMPORTER) != "stream":
        found = f"tar2sqfs at {report.tar2sqfs}" if report.tar2sqfs else "no tar2sqfs"
        run.add(IMPORTER, True, f"Enroot's import ({why}); {found} on the node")
    elif missing:
        run.add(
            IMPORTER,
            False,
            f"the stream importer ({why}), but {' and '.join(missing)} not found on job_path"
            f" {report.job_path}: its imports would exit 85",
        )
    else:
        run.add(
            IMPORTER,
            True,
            f"the stream importer ({why}): merge_layers.py with {report.python3} into"
            f" {report.tar2sqfs}",
        )


def _judge_sandbox(run: _Run, report: NodeReport) -> None:
    """The containment the node gives the image: its own user, PID and network namespaces, and as
    which host id its root runs (root's jobs: the unprivileged sandbox id, never root)."""
    if report.sandbox != "ok":
        found = report.sandbox or "no report"
        run.add(SANDBOX, False, f"the image cannot run in a sandbox here: {found}")
        return
    as_root = report.job_uid == "0"
    who = f"this job ran as uid {report.job_uid or '?'}; "
    if as_root:
        who += f"the image runs as uid {report.sandbox_uid}, never as root"
    else:
        who += f"the image runs as that uid (root's jobs: uid {SANDBOX_ID}, never root)"
    run.add(SANDBOX, True, f"user, PID and network namespaces of its own; {who}")


def _judge_inspection_path(run: _Run, report: NodeReport) -> None:
    """How this user's jobs inspect an image here: through an overlay above the mounted image
    (read only where the inspector reads), else an unpacked copy (either keeps the image
    contained; the unpack path costs an unpack of every file)."""
    kind, _, detail = report.inspection_path.partition(": ")
    if kind == "overlay":
        run.add(INSPECTION_PATH, True, f"overlay above the mounted image ({detail})")
    elif kind == "unpacked":
        run.add(INSPECTION_PATH, True, f"unpacked copy: {detail}")
    else:
        found = report.inspection_path or "no report"
        run.add(INSPECTION_PATH, False, f"the node did not say how it inspects: {found}")


def _judge_architecture(run: _Run, report: NodeReport, wanted: str | None) -> None:
    """The node's architecture, the others it runs (the job's rule: a binfmt_misc handler that
    is enabled, has flag F and matches the architecture's ELF executables), and whether it runs
    the one the profile builds for (a job that cannot exits 81)."""
    node = report.architecture
    if not node:
        run.add(ARCHITECTURE, False, "the node did not report its architecture")
        return
    run.architecture = node
    run.runs_architectures = report.runs_architectures
    others = ", ".join(report.runs_architectures) or "no other"
    found = f"{node} node; runs {others} through binfmt_misc"
    target = wanted or node
    if target not in ARCHITECTURES:
        run.add(
            ARCHITECTURE,
            False,
            f"{found}; {node} is none the job imports for ({', '.join(ARCHITECTURES)}): set"
            " image_build.arch to one this node runs, or use a partition of such nodes",
        )
    elif target == node or target in report.runs_architectures:
        how = "natively" if target == node else "through binfmt_misc"
        run.add(ARCHITECTURE, True, f"{found}; builds for {target} {how}")
    else:
        problem = report.foreign.get(target) or "no report"
        run.add(
            ARCHITECTURE,
            False,
            f"{found}; image_build.arch {target} cannot run here: {problem}. The site can"
            f" register qemu-user-static for {target} in binfmt_misc with flag F (Debian:"
            " apt-get install qemu-user-static binfmt-support), or use a partition of"
            f" {target} nodes",
        )


def _dotted(version: tuple[int, int, int]) -> str:
    return ".".join(str(part) for part in version)
