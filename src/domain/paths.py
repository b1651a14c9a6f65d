"""Path and identifier rules: workspace roots, ``.sqsh`` paths, names, ids, directive values.

Every rule lives here once; models and the renderer call these functions.
"""

from __future__ import annotations

import posixpath
import re
import stat

from slurm_image.domain.errors import InvalidIdentifier, InvalidPath

PATH_MAX = 1024
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
LIFECYCLE_ID_PREFIX = "img-"
SLURM_NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,63}")
DEFAULT_JOB_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Enroot's --mount grammar splits on ':' and ',' and refuses whitespace; no release decodes '\'.
_MOUNT_UNSAFE = re.compile(r"[\s:,\\]")
# The workspace reaches #SBATCH lines (--chdir, --output, --error): sbatch reads quotes, '\'
# and '#' there, and Slurm expands '%' patterns in --output/--error.
_SBATCH_UNSAFE = re.compile(r"[#'\"%]")


def _has_control(value: str) -> bool:
    return any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in value)


def _absolute_normalized(field: str, value: str) -> str:
    if not value:
        raise InvalidPath(field=field, rule="must not be empty", value=value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes of the command line, kept as surrogates
        raise InvalidPath(field=field, rule="must be valid UTF-8", value=ascii(value)) from None
    if len(value) > PATH_MAX:
        raise InvalidPath(field=field, rule=f"must be at most {PATH_MAX} characters", value=value)
    if _has_control(value):
        raise InvalidPath(field=field, rule="must not contain control characters", value=value)
    if not value.startswith("/"):
        raise InvalidPath(field=field, rule="must be an absolute path", value=value)
    if ".." in value.split("/"):
        raise InvalidPath(field=field, rule="must not contain '..'", value=value)
    if posixpath.normpath(value) != value or value.startswith("//"):
        raise InvalidPath(
            field=field, rule="must be normalized (no '.', '//' or trailing '/')", value=value
        )
    return value


def key_file(value: str, field: str = "policy.keys") -> str:
    """A public key file a signature policy names: an absolute, normalized path (the file itself
    is held to ``unchangeable_file_problem`` when it is read)."""
    return _absolute_normalized(field, value)


def mountable_path(field: str, value: str) -> str:
    """An absolute, normalized path that Enroot can mount: no whitespace, ':', ',' or '\\'."""
    _absolute_normalized(field, value)
    if _MOUNT_UNSAFE.search(value):
        raise InvalidPath(
            field=field,
            rule="must not contain whitespace, ':', ',' or '\\' (Enroot mount grammar)",
            value=value,
        )
    return value


def local_scratch(value: str, field: str = "image_build.local_scratch") -> str:
    """The node-local directory for Enroot's temp and data: mountable like the workspace."""
    return mountable_path(field, value)


def workspace_root(value: str, field: str = "workspace_root") -> str:
    """The site workspace root: mountable, safe on ``#SBATCH`` lines, not the root itself."""
    mountable_path(field, value)
    if _SBATCH_UNSAFE.search(value):
        raise InvalidPath(
            field=field,
            rule="must not contain '#', quotes or '%' (read by sbatch in #SBATCH lines)",
            value=value,
        )
    if value == "/":
        raise InvalidPath(field=field, rule="must not be the filesystem root", value=value)
    return value


def layer_cache(value: str, field: str = "enroot.layer_cache") -> str:
    """The private layer cache: mountable like the node-local scratch (Enroot's other cache),
    not the filesystem root; or ``~/`` and such a path (expanded when the plan is made)."""
    path = value[1:] if value.startswith("~/") else value
    mountable_path(field, path)
    if path == "/":
        raise InvalidPath(field=field, rule="must not be the filesystem root", value=value)
    return value


def sqsh_path(value: str, field: str = "source") -> str:
    """An existing image to inspect: absolute, normalized, ending in ``.sqsh``."""
    _absolute_normalized(field, value)
    if not value.endswith(".sqsh") or value.endswith("/.sqsh"):
        raise InvalidPath(field=field, rule="must name a file ending in .sqsh", value=value)
    return value


def job_path(value: str, field: str = "image_build.job_path") -> str:
    """The job's fixed PATH: ':'-separated absolute, normalized directories, none empty."""
    if not value:
        raise InvalidPath(field=field, rule="must not be empty", value=value)
    for entry in value.split(":"):
        if not entry:
            raise InvalidPath(field=field, rule="must not have empty entries", value=value)
        if not entry.startswith("/"):
            raise InvalidPath(field=field, rule="entries must be absolute directories", value=value)
        _absolute_normalized(field, entry)
        if re.search(r"\s", entry):
            raise InvalidPath(field=field, rule="entries must not contain whitespace", value=value)
    return value


def name(value: str, field: str = "name") -> str:
    """An alias or lifecycle id: ``^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$``."""
    if not NAME_PATTERN.fullmatch(value):
        raise InvalidIdentifier(
            field=field, rule="must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", value=value
        )
    return value


def slurm_name(value: str, field: str) -> str:
    """A partition, account or QOS name that can stand bare on an ``#SBATCH`` line."""
    if not SLURM_NAME_PATTERN.fullmatch(value):
        raise InvalidIdentifier(
            field=field, rule="must match ^[A-Za-z0-9_][A-Za-z0-9._+-]{0,63}$", value=value
        )
    return value


class AttemptLayout:
    """Where one lifecycle attempt lives under the workspace (docs/design.md, "The plan and
    staging"). Pure path arithmetic."""

    def __init__(self, root: str, lifecycle_id: str) -> None:
        self.root = workspace_root(root)
        self.lifecycle_id = name(lifecycle_id, "lifecycle_id")

    @property
    def images(self) -> str:
        return f"{self.root}/images"

    @property
    def tmp(self) -> str:
        return f"{self.images}/.tmp"

    @property
    def jobs(self) -> str:
        return f"{self.tmp}/jobs"

    @property
    def job_dir(self) -> str:
        return f"{self.jobs}/{self.lifecycle_id}"

    def in_job(self, relative: str) -> str:
        return f"{self.job_dir}/{relative}"

    @property
    def plan(self) -> str:
        """The staged plan: the first file a fresh process reads to find everything else."""
        return self.in_job("plan.json")

    @property
    def staged_record(self) -> str:
        """The digests of the staged files and the attempt directory's identity (at prepare)."""
        return self.in_job("staged.json")

    @property
    def submission_claim(self) -> str:
        """Created exclusively just before the script goes to the scheduler."""
        return self.in_job("submission.claim")

    @property
    def submission_record(self) -> str:
        """The scheduler's job id for this attempt, written once the submission succeeded."""
        return self.in_job("submission.json")

    @property
    def chain_record(self) -> str:
        """The chain the import job verified (``domain.verified_chain``), written by the job."""
        return self.in_job("chain.json")

    @property
    def architecture_record(self) -> str:
        """The architecture the job imported or inspected for (a uname name and a newline),
        written by the job beside ``chain_record``; none for an inspect without one."""
        return self.in_job("architecture")

    @property
    def inspection_path_record(self) -> str:
        """How the job inspected the image (``{"path": "overlay"|"unpacked", "reason": ...}``),
        written by the job beside ``chain_record``; nothing reads it back."""
        return self.in_job("inspection-path.json")

    # The job's output and error logs, as the job spec names them for the scheduler (%j: the
    # job id).
    JOB_OUTPUT = "slurm-%j.out"
    JOB_ERROR = "slurm-%j.err"

    def job_logs(self, job_id: str) -> tuple[str, str]:
        """The output and error logs of the attempt's job ``job_id``."""
        return tuple(  # type: ignore[return-value]
            self.in_job(log.replace("%j", job_id)) for log in (self.JOB_OUTPUT, self.JOB_ERROR)
        )

    @property
    def progress_record(self) -> str:
        """The job's phase and counters (``domain.progress``), replaced whole by the job as it
        goes; read by ``status``, ``wait`` and ``logs``, never trusted for publication."""
        return self.in_job("progress.json")

    # The records that make a directory an attempt ``cleanup`` and ``gc`` recognise, in the
    # order they are removed, after everything else: an interrupted removal leaves an attempt
    # both can finish. The claim goes before the submission record (a claim alone is a
    # submission in doubt, which both keep), the plan before the submission record (which
    # still gives ``gc`` the attempt's job and age).
    RECORDS_REMOVED_LAST = ("staged.json", "submission.claim", "plan.json", "submission.json")

    # What staging and submission put into an attempt directory; ``submit`` refuses an attempt
    # holding anything else (a planted ``slurm-<id>.err`` symlink, ``home``, ``enroot``, ...).
    STAGED_ENTRIES = frozenset(
        {
            "plan.json",
            "job.sbatch",
            "inspect_image.py",
            "enroot.rc",
            "output",
            "staged.json",
            "submission.claim",
        }
    )


# -- who may change a directory on the way to an attempt (docs/design.md) -------------

WORKSPACE_SETUP_HINT = (
    "give it the sticky bit or take group and other write away, and let it be owned by you "
    "or root: e.g. `chmod 1777 DIR` (shared by all), `chown root:GROUP DIR && chmod 3770 "
    "DIR` (shared by a group) or `chmod 0755 DIR`"
)
OWN_ROOT_HINT = (
    "the workspace root must be a directory that only you (or root) can add entries to: in a "
    "shared directory make one of your own (`mkdir -m 0755 SHARED/$USER`) and set "
    "workspace_root (or SLURM_IMAGE_WORKSPACE_ROOT) to it"
)
STORE_DIRECTORY_HINT = (
    "the store's directory must be your own: have its owner (or an administrator) remove it, "
    "or set workspace_root to a directory of your own"
)
IMAGE_COPY_HINT = (
    "copy it into a directory of your own (`cp SOURCE DIR/`, DIR and every directory above it "
    "owned by you or root, and sticky where group or others may write) and inspect the copy"
)
_OTHERS_WRITE = 0o022
_STICKY = 0o1000


def shared_directory_problem(mode: int, owner: int, uid: int) -> str | None:
    """What lets another user rename or replace entries of a directory on the way to the
    workspace (the root and its parents), or ``None``: it must be owned by ``uid`` or root and,
    when group or others may write it, carry the sticky bit. ``mode`` is ``st_mode``."""
    if owner not in (uid, 0):
        return f"is owned by uid {owner}, neither by uid {uid} nor by root"
    if mode & _OTHERS_WRITE and not mode & _STICKY:
        return "is writable by group or others without the sticky bit"
    return None


def _closed_directory_problem(mode: int, owner: int, uid: int, threat: str) -> str | None:
    """``shared_directory_problem``, and closed to group and others even with the sticky bit:
    in a sticky directory others still create names first (``threat``: what that lets them
    do)."""
    problem = shared_directory_problem(mode, owner, uid)
    if problem is None and mode & _OTHERS_WRITE:
        return f"is writable by group or others, who could {threat}"
    return problem


def workspace_root_problem(mode: int, owner: int, uid: int) -> str | None:
    """The same for the workspace root itself, which must also be closed to group and others
    even with the sticky bit: whoever may add entries to it could create its ``images/`` (or
    anything the store needs there) first, and jam every command of its owner."""
    return _closed_directory_problem(mode, owner, uid, "create its images/ before you")


def output_directory_problem(mode: int, owner: int, uid: int) -> str | None:
    """What lets another user plant or replace a file the command writes for others to read
    (``metrics --textfile``, in node_exporter's textfile directory), or ``None``: the directory
    must be owned by ``uid`` or root and closed to group and others even with the sticky bit.
    In a sticky directory another user can create the file's name first: every run of its
    owner then fails to replace it, and the planted figures are what is scraped."""
    return _closed_directory_problem(
        mode, owner, uid, "plant the file before you (or replace it) with figures of their own"
    )


def unchangeable_file_problem(mode: int, owner: int, uid: int) -> str | None:
    """What lets another user change the bytes of a file (an inspected ``.sqsh``, a published
    artifact), or ``None``: a regular file owned by ``uid`` or root that group and others
    cannot write. The directories on its way are held to ``shared_directory_problem``."""
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    if owner not in (uid, 0):
        return f"is owned by uid {owner}, neither by uid {uid} nor by root"
    if mode & _OTHERS_WRITE:
        return "is writable by group or others"
    return None


def others_may_write(mode: int) -> bool:
    """Whether group or others may write the file or directory of ``st_mode`` ``mode``."""
    return bool(mode & _OTHERS_WRITE)


def own_file_problem(mode: int, owner: int, uid: int) -> str | None:
    """What lets anyone but ``uid`` change a file of the store that ``uid`` appends to (a
    history month file), or ``None``: a regular file owned by ``uid`` itself that group and
    others cannot write."""
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    if owner != uid:
        return f"is owned by uid {owner}, not {uid}"
    if others_may_write(mode):
        return "is writable by group or others"
    return None


def own_directory_problem(mode: int, owner: int, uid: int) -> str | None:
    """The same for a directory below the root (``images/`` and down to the attempt): owned by
    ``uid`` itself, and sticky when group or others may write it."""
    if owner != uid:
        return f"is owned by uid {owner}, not by uid {uid}"
    if mode & _OTHERS_WRITE and not mode & _STICKY:
        return "is writable by group or others without the sticky bit"
    return None


def ancestors(path: str) -> list[str]:
    """``/``, then every directory on the way to the absolute ``path``, then ``path`` itself."""
    parts = [part for part in path.split("/") if part]
    return ["/"] + ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def secret_file_problem(mode: int, owner: int, uid: int) -> str | None:
    """What is wrong with a file holding a secret (the REST token file, registry credentials),
    or ``None``: a regular file of the user's own that group and others can neither read nor
    write (``chmod 600``). ``mode`` is ``st_mode`` of the file as opened."""
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    if owner != uid:
        return f"is owned by uid {owner}, not by uid {uid}"
    if mode & 0o077:
        return "is readable or writable by group or others (chmod 600 it)"
    return None
