"""The batch script: a pure, deterministic function of the plan (docs/design.md, "The batch job").

The body is the job's steps (``domain/job_steps/``, one shell file each) in a fixed order, with
the import steps present for import plans only; otherwise only the header's ``#SBATCH`` lines
and the ``readonly`` assignments vary, and every varying value is validated by the plan's models
and quoted by ``shell.quote``. Every path the steps use is one of those assignments.
"""

from __future__ import annotations

import textwrap
from importlib import resources

from slurm_image.domain import job_steps, paths, verified_chain
from slurm_image.domain.architecture import ARCHITECTURES, elf_machine, oci_name
from slurm_image.domain.inspection import MAX_INSPECTION_BYTES
from slurm_image.domain.job import JobSpec
from slurm_image.domain.plan import CONTAINER_PREFIX, Plan
from slurm_image.domain.profile import STREAM_TOOLS
from slurm_image.domain.reference import parse_reference
from slurm_image.domain.shell import quote

MIN_ENROOT = {"import_oci": "3.4.1", "inspect_sqsh": "3.5.0"}
DIGEST_URI_ENROOT = "4.0.0"
SQUASH_DEFAULT = "-comp lzo -noD"
SQUASH_MEM_MIN_MIB = 64
# The host id the image's side of root's job runs as (the kernel's overflow id): never root.
SANDBOX_ID = 65534
# Where the kernel lists its binfmt_misc handlers (a header value, so that a test can point the
# job at handlers of its own).
BINFMT_MISC = "/proc/sys/fs/binfmt_misc"

EXIT_CODES: dict[int, str] = {
    64: "the job's Slurm environment is unusable (CPU count, job id)",
    65: "the image's digest could not be computed",
    66: "the image is not a regular file",
    69: "the image has no Python 3.8 or newer",
    70: "a staged file does not match its digest",
    71: "a directory the job uses could be changed by another user (symlink, owner, mode)",
    73: "candidate.sqsh, its partial file, chain.json, the architecture record or the inspection"
    " path record already exists",
    74: "the image changed during the job",
    75: "the job was requeued (an attempt directory is used once)",
    76: "no inspection result (the inspector refused the image or failed)",
    78: "Enroot (or the curl or jq its import needs) is missing, unreadable or too old (import"
    " needs 3.4.1, inspect 3.5.0)",
    79: "the registry's answer does not match the pinned digest (or the image config names a"
    " path outside the root)",
    80: "the node cannot sandbox the image (setpriv, unshare, user, PID and network namespaces)",
    81: "the node cannot run executables of the architecture asked for (neither its own nor one"
    " of a binfmt_misc handler with flag F, e.g. qemu-user-static)",
    82: "the image is not of the architecture the job imported for (its config names another,"
    " or its index names no manifest for it)",
    84: "the layer cache could be changed by another user (owner, mode, a symlink of another"
    " user's, not a directory) or cannot be created",
    85: "the stream importer's python3 or tar2sqfs is missing on the node",
    86: "the stream importer could not merge the image's layers or squash them (tar2sqfs)",
}


def directives(spec: JobSpec) -> list[str]:
    """The ``#SBATCH`` lines. Values are validated to stand bare."""
    return [f"#SBATCH {option}" for option in spec.sbatch_options()]


def _squash_options(plan: Plan) -> str:
    spec = plan.job_spec()
    mem = max(SQUASH_MEM_MIN_MIB, spec.memory_mib // 2)
    return f"-mem {mem}M"


def _required_distributions(plan: Plan) -> str:
    """The inspector's SLURM_IMAGE_REQUIRE: client images only (it is a usage error otherwise)."""
    if plan.request.role != "client":
        return ""
    return ",".join(plan.profile.inspection.client_distributions)


# Values that no step reads (shellcheck would ask why), for whoever reads the script.
_UNREAD = "# shellcheck disable=SC2034 # {}"
_UNREAD_BY_ANY = {"LIFECYCLE_ID": "the lifecycle the job belongs to, for its reader"}
_UNREAD_BY_STREAM = {
    "SOURCE_URI_TAG_DIGEST": "the stream importer asks the registry by digest",
    "DIGEST_URI_ENROOT": "the stream importer asks the registry by digest",
}
_UNREAD_BY_INSPECT = {
    "CANDIDATE": "an inspect job makes no candidate",
    "SOURCE_URI": "an inspect job reads no source",
}


def _assignments(plan: Plan) -> list[str]:
    p = plan.paths
    build = plan.profile.image_build
    layout = paths.AttemptLayout(plan.profile.workspace_root, plan.lifecycle_id)
    values: list[tuple[str, str]] = [
        ("LIFECYCLE_ID", plan.lifecycle_id),
        ("OPERATION", plan.operation),
        ("ROLE", plan.request.role),
        ("WORKSPACE_ROOT", layout.root),
        ("JOB_DIR", p.job_dir),
        ("JOB_PATH", build.job_path),
        ("LOCAL_SCRATCH", build.local_scratch or ""),
        ("INSPECTOR", p.inspector),
        ("INSPECTOR_SHA256", plan.runtime.inspector_sha256),
        ("RC_FILE", p.rc),
        ("RC_SHA256", plan.runtime.rc_sha256),
        ("OUTPUT_DIR", p.output_dir),
        ("RESULT", p.result),
        ("JOB_HOME", p.home),
        ("JOB_ENROOT", enroot_directory(p.enroot_config)),
        ("JOB_ENROOT_CONFIG", p.enroot_config),
        ("SQSH", p.sqsh),
        ("CANDIDATE", p.candidate or ""),
        ("PARTIAL", p.partial or ""),
        ("SOURCE_URI", plan.enroot_uri or ""),
        ("MIN_ENROOT", MIN_ENROOT[plan.operation]),
        ("SQUASH_MEMORY", _squash_options(plan)),
        ("CONTAINER_PREFIX", CONTAINER_PREFIX),
        ("REQUIRE", _required_distributions(plan)),
        ("SANDBOX_ID", str(SANDBOX_ID)),
        ("RESULT_MAX_BYTES", str(MAX_INSPECTION_BYTES)),
        ("ARCHITECTURE", plan.architecture or ""),
        ("ARCHITECTURE_RECORD", layout.architecture_record),
        ("INSPECTION_PATH_RECORD", layout.inspection_path_record),
        ("PROGRESS", layout.progress_record),
    ]
    unread = dict(_UNREAD_BY_ANY)
    if plan.operation != "import_oci":
        unread.update(_UNREAD_BY_INSPECT)
    lines = []
    for key, value in values:
        if key in unread:
            lines.append(_UNREAD.format(unread[key]))
        lines.append(f"readonly {key}={quote(value, key)}")
        if key == "JOB_DIR":
            lines.append(attempt_parents(layout))
    return lines + architecture_assignments()


def architecture_assignments() -> list[str]:
    """What the architecture rules (step ``architecture-rules``, the job's and the doctor's)
    read: ``ARCHITECTURES``, each ``UNAME:OCI:E_MACHINE`` (domain/architecture.py), and where
    the binfmt_misc handlers are listed."""
    table = " ".join(
        quote(f"{name}:{oci_name(name)}:{elf_machine(name)}") for name in ARCHITECTURES
    )
    return [
        f"readonly ARCHITECTURES=({table})",
        f"readonly BINFMT_MISC={quote(BINFMT_MISC, 'BINFMT_MISC')}",
    ]


def attempt_parents(layout: paths.AttemptLayout) -> str:
    """``ATTEMPT_PARENTS``: the directories from images/ down to the attempt directory's parent,
    which must be the user's own like the attempt directory itself (step 1b)."""
    parents = (layout.images, layout.tmp, layout.jobs)
    return f"readonly ATTEMPT_PARENTS=({' '.join(quote(path) for path in parents)})"


def enroot_directory(enroot_config: str) -> str:
    """The directory that holds Enroot's config directory (``<job>/enroot``)."""
    return enroot_config.rsplit("/", 1)[0]


def _import_assignments(plan: Plan) -> list[str]:
    """The values only an import reads: both URI forms (the job picks by Enroot's version), the
    registry, the host whose staged credentials it uses (none: anonymous), and where it records
    the chain it verified."""
    if plan.operation != "import_oci":
        return []
    reference = parse_reference(plan.request.source)
    layout = paths.AttemptLayout(plan.profile.workspace_root, plan.lifecycle_id)
    values = [
        ("SOURCE_URI_TAG_DIGEST", reference.enroot_uri_tag_digest),
        ("PINNED_HEX", reference.digest.removeprefix("sha256:")),
        ("DIGEST_URI_ENROOT", DIGEST_URI_ENROOT),
        ("REGISTRY_HOST", reference.enroot_registry),
        ("CREDENTIALS_HOST", plan.credentials_host or ""),
        ("CHAIN_RECORD", layout.chain_record),
        ("CHAIN_FORMAT", verified_chain.RECORD_FORMAT),
        ("LAYER_CACHE", plan.layer_cache or ""),
        ("TOKEN_MAX_AGE_MINUTES", str(plan.job_spec().time_limit_minutes)),
    ]
    lines = []
    for key, value in values:
        if _streams(plan) and key in _UNREAD_BY_STREAM:
            lines.append(_UNREAD.format(_UNREAD_BY_STREAM[key]))
        lines.append(f"readonly {key}={quote(value, key)}")
    if _streams(plan):
        lines.append(f"readonly REPOSITORY={quote(reference.enroot_repository, 'REPOSITORY')}")
        lines.append(f"readonly STREAM_TOOLS=({' '.join(quote(tool) for tool in STREAM_TOOLS)})")
    return lines


def _site_environment(plan: Plan) -> list[str]:
    env = plan.profile.enroot.environment
    return [f"export {key}={quote(env[key], key)}" for key in sorted(env)]


def _streams(plan: Plan) -> bool:
    """Whether the plan imports with the stream importer (the profile's image_build.importer)."""
    return plan.operation == "import_oci" and plan.profile.image_build.importer_name == "stream"


def render_script(plan: Plan) -> str:
    """Render the batch script of ``plan``. The same plan always gives the same bytes."""
    importing = plan.operation == "import_oci"
    body = [job_steps.steps(*CHECK_STEPS)]
    if _streams(plan):
        body += [
            job_steps.steps(*STREAM_IMPORT_STEPS_BEFORE_CURL),
            _streamer_step(),
            _verifying_curl_step(),
            job_steps.steps(*IMPORT_STEPS_AFTER_CURL),
        ]
    elif importing:
        body += [
            job_steps.steps(*IMPORT_STEPS_BEFORE_CURL),
            _verifying_curl_step(),
            job_steps.steps(*IMPORT_STEPS_AFTER_CURL),
        ]
    body += [
        job_steps.steps(*IMAGE_STEPS_BEFORE_STAGE),
        _stage_step(),
        job_steps.steps(*IMAGE_STEPS_AFTER_STAGE),
    ]
    steps = "".join(body)
    header = [
        "#!/bin/bash -p",
        *directives(plan.job_spec()),
        f"# slurm-image-lifecycle: {plan.operation} for lifecycle {plan.lifecycle_id}",
        f"# plan sha256: {plan.sha256()}",
        "#",
        *exit_code_table(steps),
        "",
        reexec_step(plan.profile.image_build.job_path),
        "set -Eeuo pipefail",
        "umask 077",
        *_assignments(plan),
        *_import_assignments(plan),
        *_site_environment(plan),
    ]
    return "\n".join(header) + "\n\n" + steps


def exit_code_table(steps: str) -> list[str]:
    """The comment lines that list the EXIT_CODES ``steps`` can end with (``die CODE``), for
    whoever reads the script: an inspect job has no import to fail."""
    lines = ["# The job's exit codes (0: done):"]
    for code, meaning in sorted(EXIT_CODES.items()):
        if f"die {code} " not in steps:
            continue
        lines += textwrap.wrap(
            meaning,
            width=100,
            initial_indent=f"#   {code}  ",
            subsequent_indent="#       ",
            break_on_hyphens=False,
        )
    return lines


def reexec_step(job_path: str) -> str:
    """Step 0, the clean-environment re-exec on ``job_path`` (the doctor's job starts so too):
    the only step with values filled in, because it runs before the assignments."""
    text = job_steps.step("00-reexec").removesuffix("\n")
    return text.replace("@JOB_PATH@", quote(job_path)).replace(
        "@SLURM_VARIABLES@", " ".join(JOB_SLURM_VARIABLES)
    )


# The Slurm variables the job reads; nothing else of Slurm's survives the re-exec (step 0 says
# why, in the script).
JOB_SLURM_VARIABLES = (
    "SLURM_JOB_ID",
    "SLURM_RESTART_COUNT",
    "SLURM_CPUS_ON_NODE",
    "SLURM_JOB_CPUS_PER_NODE",
)

# The steps after the assignments, in the order the job runs them (files in job_steps/). 1b:
# no path is trusted before the directories on its way are checked, by the rules of
# domain/paths.py (shared_/own_directory_problem) written in bash; the doctor runs them too.
# 5d: the architecture (the plan's, else the node's for an import) and whether this node runs
# it, by the rule of step ``architecture-rules``, which the doctor reports with.
CHECK_STEPS = (
    "helpers",
    "progress",
    "01-requeue",
    "01-job-id",
    "01b-directory-rules",
    "01b-attempt-directories",
    "hash-file",
    "02-staged-files",
    "03-cpus",
    "image-output",
    "04-scratch",
    "05-enroot-version",
    "05b-sandbox",
    "05c-sandbox-check",
    "architecture-rules",
    "05d-architecture",
)
# Import plans only (an inspect script holds no ``enroot import`` at all): 4b the layer cache
# kept between the user's imports, held to the workspace's rules; 6a the URI form the
# node's Enroot reads and the import run so that a failure says why; 6b the staged registry
# credentials and curl kept to HTTP/1.1; 6c the verifying curl on Enroot's PATH (README, Threat
# model) and what the job reads of it; 6 the import into the attempt.
IMPORT_STEPS_BEFORE_CURL = ("04b-layer-cache", "06a-run-import", "06b-credentials", "06c-chain")
IMPORT_STEPS_AFTER_CURL = ("06c-check-chain", "06-import")
# With image_build.importer = "stream", 6a is the stream importer's: the fetches through the
# verifying curl, each layer checked, merged into tar2sqfs (``stream-squash``) by the streamer
# the script carries (below).
STREAM_IMPORT_STEPS_BEFORE_CURL = (
    "04b-layer-cache",
    "stream-squash",
    "06a-stream-import",
    "06b-credentials",
    "06c-chain",
)
# The inspection path (step ``inspection-path``, which the doctor reports with): the overlay
# above the mounted image, else an unpacked copy. 8b: Enroot's `start` reads the root's
# etc/fstab and etc/environment and runs hooks on the host's view of the root, where an image's
# symlinks lead out of it (docs/enroot.md); the job neutralises those entry points
# (``contain-root``, on either path) and starts with a configuration of its own. 8c: the stage,
# the sandbox's init on the overlay path. docs/trust.md, "Untrusted images", says why.
IMAGE_STEPS_BEFORE_STAGE = (
    "inspection-path",
    "contain-root",
    "07-open-image",
    "08-create",
    "08b-contain-image",
)
IMAGE_STEPS_AFTER_STAGE = ("09-start", "10-result")

# The stage, a program of its own that step 8c writes into the sandbox's directory: it mounts
# the image and the overlay, contains the root with the job's own ``contain_root`` and runs
# `enroot start` in a PID namespace of its own.
STAGE_MARKER = "STAGE_PROGRAM"
STAGE_STEPS = ("stage-image", "helpers", "contain-root", "stage-image-run")


def stage_program() -> str:
    """The stage's program, as step 8c writes it."""
    return job_steps.steps(*STAGE_STEPS)


def _stage_step() -> str:
    """Step 8c: on the overlay path, the root's mountpoint and the stage's here-document,
    written once, never through an existing file."""
    return (
        "# 8c. On the overlay path the sandbox's init is the stage: the mounts, contain_root on\n"
        "# the overlay, then `enroot start` (README, Threat model).\n"
        "readonly STAGE=$SANDBOX/stage STAGE_STATE=$scratch/stage-state\n"
        'if [ "$inspected_by" = overlay ]; then\n'
        '    mkdir -m 0700 -- "$ROOTFS"\n'
        f"    (set -C && cat >\"$STAGE\") <<'{STAGE_MARKER}'\n"
        f"{stage_program()}{STAGE_MARKER}\n"
        "fi\n\n"
    )


# The verifying curl, a program of its own that step 6c writes into the job's scratch. Enroot
# fetches a manifest with `curl -o /proc/self/fd/N -w '%{http_code}' ARGS -- URL` (3.4.1 adds
# `--stderr`), the permission probe with -I, and blobs with `curl ARGS -f -- URL` to stdout; it
# hashes no manifest. The job's one hash function is in it too.
VERIFYING_CURL_MARKER = "VERIFYING_CURL"
VERIFYING_CURL_STEPS = (
    "verifying-curl",
    "hash-file",
    "progress",
    "verifying-curl-progress",
    "verifying-curl-checks",
)


def verifying_curl() -> str:
    """The verifying curl's program, as step 6c writes it."""
    return job_steps.steps(*VERIFYING_CURL_STEPS)


def _verifying_curl_step() -> str:
    """Step 6c's here-document: the program, written once, never through an existing file."""
    return (
        f"(set -C && cat >\"$CHAIN/bin/curl\") <<'{VERIFYING_CURL_MARKER}'\n"
        f"{verifying_curl()}{VERIFYING_CURL_MARKER}\n"
    )


# The streamer (slurm_image.streamer's merge_layers.py, Python 3.8 and its standard library
# alone), carried in the script so that the script's digest covers it: the stream importer's
# step 6a writes it into the job's scratch, once, never through an existing file.
STREAMER_MARKER = "STREAMER_PROGRAM"
STREAMER = resources.files("slurm_image.streamer").joinpath("merge_layers.py").read_text("utf-8")


def _streamer_step() -> str:
    """``write_streamer``: the streamer's here-document, as step 6a calls it."""
    return (
        "write_streamer() {\n"
        f"    (set -C && cat >\"$STREAMER\") <<'{STREAMER_MARKER}'\n"
        f"{STREAMER}{STREAMER_MARKER}\n"
        "}\n"
    )
