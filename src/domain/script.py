"""The batch script: a pure, deterministic function of the plan (design §5).

The body is fixed text, with the import step present for import plans only; otherwise only the
header's ``#SBATCH`` lines and the ``readonly`` assignments vary, and every varying value is
validated by the plan's models and quoted by ``shell.quote``.
"""

from __future__ import annotations

from slurm_image.domain.inspection import MAX_INSPECTION_BYTES
from slurm_image.domain.job import JobSpec
from slurm_image.domain.plan import CONTAINER_PREFIX, Plan
from slurm_image.domain.reference import parse_reference
from slurm_image.domain.shell import quote

MIN_ENROOT = {"import_oci": "3.4.1", "inspect_sqsh": "3.5.0"}
DIGEST_URI_ENROOT = "4.0.0"
SQUASH_DEFAULT = "-comp lzo -noD"
SQUASH_MEM_MIN_MIB = 64
# The host id the image's side of root's job runs as (the kernel's overflow id): never root.
SANDBOX_ID = 65534

EXIT_CODES: dict[int, str] = {
    64: "the job's Slurm environment is unusable (CPU count, job id)",
    65: "the image's digest could not be computed",
    66: "the image is not a regular file",
    69: "the image has no Python 3.8 or newer",
    70: "a staged file does not match its digest",
    71: "a directory the job uses could be changed by another user (symlink, owner, mode)",
    73: "candidate.sqsh, its partial file or chain.json already exists",
    74: "the image changed during the job",
    75: "the job was requeued (an attempt directory is used once)",
    76: "no inspection result (the inspector refused the image or failed)",
    78: "Enroot (or the curl or jq its import needs) is missing, unreadable or too old (import"
    " needs 3.4.1, inspect 3.5.0)",
    79: "the registry's answer does not match the pinned digest (or the image config names a"
    " path outside the root)",
    80: "the node cannot sandbox the image (setpriv, unshare, user and PID namespaces)",
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


def _assignments(plan: Plan) -> list[str]:
    p = plan.paths
    build = plan.profile.image_build
    values: list[tuple[str, str]] = [
        ("LIFECYCLE_ID", plan.lifecycle_id),
        ("OPERATION", plan.operation),
        ("ROLE", plan.request.role),
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
    ]
    return [f"readonly {key}={quote(value, key)}" for key, value in values]


def _import_assignments(plan: Plan) -> list[str]:
    """The values only an import reads: both URI forms (the job picks by Enroot's version), the
    registry, and the host whose staged credentials it uses (none: anonymous)."""
    if plan.operation != "import_oci":
        return []
    reference = parse_reference(plan.request.source)
    values = [
        ("SOURCE_URI_TAG_DIGEST", reference.enroot_uri_tag_digest),
        ("PINNED_HEX", reference.digest.removeprefix("sha256:")),
        ("DIGEST_URI_ENROOT", DIGEST_URI_ENROOT),
        ("REGISTRY_HOST", reference.enroot_registry),
        ("CREDENTIALS_HOST", plan.credentials_host or ""),
    ]
    return [f"readonly {key}={quote(value, key)}" for key, value in values]


def _site_environment(plan: Plan) -> list[str]:
    env = plan.profile.enroot.environment
    return [f"export {key}={quote(env[key], key)}" for key in sorted(env)]


def render_script(plan: Plan) -> str:
    """Render the batch script of ``plan``. The same plan always gives the same bytes."""
    header = [
        "#!/bin/bash -p",
        *directives(plan.job_spec()),
        f"# slurm-image-lifecycle: {plan.operation} for lifecycle {plan.lifecycle_id}",
        f"# plan sha256: {plan.sha256()}",
        "",
        reexec_step(plan.profile.image_build.job_path),
        "set -Eeuo pipefail",
        "umask 077",
        *_assignments(plan),
        *_import_assignments(plan),
        *_site_environment(plan),
    ]
    importing = plan.operation == "import_oci"
    import_steps = _IMPORT_RUN + _IMPORT_CREDENTIALS + verified_chain_step() + _IMPORT
    import_steps = import_steps if importing else ""
    body = _BODY.replace("@HASH_FILE@\n", HASH_FILE)
    body = body.replace("@IMPORT@\n", import_steps)
    body = body.replace("@CONTAIN_IMAGE@\n", _CONTAIN_IMAGE)
    body = body.replace("@CHECK_CHAIN@\n", _CHECK_CHAIN)
    return "\n".join(header) + "\n" + body


def reexec_step(job_path: str) -> str:
    """Step 0, the clean-environment re-exec on ``job_path`` (the doctor's job starts so too)."""
    return _REEXEC.replace("@JOB_PATH@", quote(job_path)).replace(
        "@SLURM_VARIABLES@", " ".join(JOB_SLURM_VARIABLES)
    )


# The Slurm variables the job reads (issue #14): SLURM_JOB_ID names the container and scratch,
# SLURM_RESTART_COUNT is the requeue guard, the two CPU variables the allocation. Nothing else of
# Slurm's survives the re-exec: Slurm 22.05 loads the submitter's login environment, SLURM_JWT
# and other tokens included, and the product's own SLURM_IMAGE_* settings share the prefix.
JOB_SLURM_VARIABLES = (
    "SLURM_JOB_ID",
    "SLURM_RESTART_COUNT",
    "SLURM_CPUS_ON_NODE",
    "SLURM_JOB_CPUS_PER_NODE",
)

# Step 0: bash -p has neither read BASH_ENV nor imported functions. Re-exec once under env -i
# with only the allowlisted Slurm variables: Slurm 22.05 loads the submitter's login environment
# even with --export=NIL. The marker is an argument, which no environment can forge.
_REEXEC = r"""IFS=$' \t\n'
if [ "${1-}" != "--clean-environment" ]; then
    keep=()
    for variable in @SLURM_VARIABLES@; do
        [ -z "${!variable+set}" ] || keep+=("$variable=${!variable}")
    done
    exec /usr/bin/env -i PATH=@JOB_PATH@ LC_ALL=C "NODE_TMPDIR=${TMPDIR-}" \
        "${keep[@]}" /bin/bash -p "$0" --clean-environment
fi"""

# Step 6a (import plans only): the URI form the node's Enroot reads, and the import itself run
# so that a failure says why it most likely failed.
_IMPORT_RUN = r"""# 6a. Enroot 3.x refuses REG#IMAGE@sha256:... and misreads
# REG/IMAGE@sha256:...; it reads the digest in tag position.
if enroot_at_least "$DIGEST_URI_ENROOT"; then
    source_uri=$SOURCE_URI
else
    source_uri=$SOURCE_URI_TAG_DIGEST
fi
import_failed() {
    local status=$1 log=$2
    if ! enroot_at_least "$DIGEST_URI_ENROOT" && grep -qi 'zstd' -- "$log"; then
        die "$status" "the image has zstd-compressed layers, which Enroot $version_output cannot" \
            "import (zstd layers need Enroot $DIGEST_URI_ENROOT or newer)"
    fi
    if [ -n "$CREDENTIALS_HOST" ]; then
        die "$status" "enroot import from $REGISTRY_HOST failed with status $status, with the" \
            "credentials staged for $CREDENTIALS_HOST (wrong login or password, or no access to" \
            "the image?)"
    fi
    die "$status" "enroot import from $REGISTRY_HOST failed with status $status, without" \
        "credentials (no entry for $REGISTRY_HOST in the profile's enroot.credentials_file;" \
        "a private registry needs one)"
}
run_import() {
    # Enroot's own output is kept to tell a zstd refusal from other failures, then shown. Its
    # curl is the verifying one of step 6c, for this command alone.
    local status=0 log=$scratch/import.log
    PATH=$CHAIN/bin:$PATH SLURM_IMAGE_CHAIN=$CHAIN SLURM_IMAGE_CURL=$real_curl \
        SLURM_IMAGE_PIN=$PINNED_HEX enroot import -o "$PARTIAL" "$source_uri" 2>"$log" ||
        status=$?
    remove_credentials
    cat -- "$log" >&2
    check_chain "$status"
    ((status == 0)) || import_failed "$status" "$log"
}
"""

# Step 6b (import plans only): the registry credentials Prepare staged, and curl kept to HTTP/1.1.
_IMPORT_CREDENTIALS = r"""# 6b. Registry credentials: only the staged entry for this registry,
# used by this import alone and removed as soon as it ends (the image runs later, and can mount
# host paths).
staged_credentials=$JOB_ENROOT_CONFIG/.credentials
remove_credentials() {
    rm -f -- "$staged_credentials"
    rm -rf -- "$ENROOT_CACHE_PATH"/.tokens.*
}
if [ -n "$CREDENTIALS_HOST" ]; then
    if [ -L "$staged_credentials" ] || [ ! -f "$staged_credentials" ]; then
        die 70 "the credentials staged for $CREDENTIALS_HOST are not a regular file"
    fi
    say "importing with the credentials staged for $CREDENTIALS_HOST"
elif [ -e "$staged_credentials" ] || [ -L "$staged_credentials" ]; then
    die 70 "$staged_credentials exists, but the plan stages no credentials"
else
    say "no credentials for $REGISTRY_HOST: importing anonymously"
fi
# Enroot finds the Basic credentials in curl's verbose output with exact case; over HTTP/2 curl
# prints the header in lower case and the credentials are dropped silently (enroot.md).
(set -C && printf '%s\n' --http1.1 >"$JOB_HOME/.curlrc") ||
    die 70 "cannot create $JOB_HOME/.curlrc"
"""

# The one SHA-256 of the job's bash, on stdin; the verifying curl below runs it too.
HASH_FILE = r"""hash_file() {
    local out
    if command -v openssl >/dev/null 2>&1; then
        out=$(openssl dgst -sha256 -r) || return 1
    else
        out=$(sha256sum) || return 1
    fi
    out=${out%% *}
    [[ $out =~ ^[0-9a-f]{64}$ ]] || return 1
    printf '%s\n' "$out"
}
"""

# The verifying curl (README, Threat model): a program of its own, written by step 6c into the
# job's scratch and found first on Enroot's PATH during the import. Enroot fetches a manifest
# with `curl -o /proc/self/fd/N -w '%{http_code}' ARGS -- URL` (3.4.1 adds `--stderr`), the
# permission probe with -I, and blobs with `curl ARGS -f -- URL` to stdout; it hashes no manifest.
VERIFYING_CURL_MARKER = "VERIFYING_CURL"
_VERIFYING_CURL = r"""#!/bin/bash -p
# The verifying curl of a slurm-image import job. Enroot gets a manifest only when its sha256
# is the digest it asked for (the pin, or one a verified index names), and the image config
# only when its sha256 is the verified manifest's and its WorkingDir is a normalized absolute
# path; anything else is written to the verdict and fails like curl. The rest is curl's own.
set -euo pipefail
umask 077
IFS=$' \t\n'
chain=${SLURM_IMAGE_CHAIN:?} real=${SLURM_IMAGE_CURL:?} pin=${SLURM_IMAGE_PIN:?}
refuse() {
    printf '%s\n' "$*" >>"$chain/verdict"
    printf 'slurm-image: refused: %s\n' "$*" >&2
    exit 1
}
@HASH_FILE@
# Enroot ends every call with `-- URL`; what is neither a manifest nor a config is curl's.
if (($# < 2)) || [ "${*: -2:1}" != "--" ]; then
    exec "$real" "$@"
fi
url=${*: -1}
if [[ $url == */manifests/* ]]; then
    kind=manifest
elif [[ $url =~ ^https?://[^/?#]+/v2/[^?#]+/blobs/sha256:([0-9a-f]{64})$ ]] &&
    [ -e "$chain/configs/${BASH_REMATCH[1]}" ]; then
    kind=config digest=${BASH_REMATCH[1]}
else
    exec "$real" "$@"
fi
options=("${@:1:$#-2}")
output="" format="" head=0 args=()
for ((i = 0; i < ${#options[@]}; i++)); do
    option=${options[i]}
    case $option in
    -o | -w | --stderr | --proto | --retry | --connect-timeout | --max-time | -H | -K | \
        --netrc-file | -u)
        ((i + 1 < ${#options[@]})) || refuse "curl $option without a value for $url"
        value=${options[++i]}
        case $option in
        -o) [ -z "$output" ] && output=$value || refuse "curl -o twice for $url" ;;
        -w) [ -z "$format" ] && format=$value || refuse "curl -w twice for $url" ;;
        *) args+=("$option" "$value") ;;
        esac
        ;;
    -SsL | -G | -v | -f) args+=("$option") ;;
    -I) head=1 ;;
    *) refuse "curl $option for $url is not a call the job can verify" ;;
    esac
done

if [ "$kind" = config ]; then
    # docker::_download_extract: the blob to stdout, checked, then Enroot's mkdir -p of
    # "${rootfs}${WorkingDir}" on the host: the path must stay inside the root.
    [ -z "$output$format" ] && ((!head)) || refuse "curl for the image config $url: not a download"
    body=$(mktemp "$chain/tmp/config.XXXXXX")
    status=0
    "$real" "${args[@]}" -- "$url" >"$body" || status=$?
    ((status == 0)) || exit "$status"
    actual=$(hash_file <"$body") || refuse "cannot hash the image config sha256:$digest"
    [ "$actual" = "$digest" ] ||
        refuse "the registry answered the image config sha256:$digest with sha256:$actual"
    workdir=$(jq -r '(.config.WorkingDir)? // empty' <"$body" 2>/dev/null) ||
        refuse "the image config sha256:$digest is not JSON"
    if [ -n "$workdir" ] && [ "$workdir" != / ]; then
        if [[ ! $workdir =~ ^(/[^/]+)+$ || $workdir == *[[:cntrl:]]* ||
            $workdir/ == */./* || $workdir/ == */../* ]]; then
            refuse "the image config sha256:$digest names WorkingDir ${workdir:0:200}," \
                "not a normalized absolute path (Enroot would create it outside the root)"
        fi
    fi
    : >"$chain/checked/$digest"
    exec cat -- "$body"
fi

# A manifest: the -I probe reads headers only; a GET must be by digest, the pin or one that a
# verified index names, and is handed over only when its bytes hash to that digest.
((!head)) || exec "$real" "$@"
[[ $url =~ ^https?://[^/?#]+/v2/[^?#]+/manifests/sha256:([0-9a-f]{64})$ ]] ||
    refuse "a manifest asked for other than by its sha256 digest: $url"
digest=${BASH_REMATCH[1]}
[ "$digest" = "$pin" ] || [ -e "$chain/named/$digest" ] ||
    refuse "manifest sha256:$digest is neither the pinned digest nor named by its index"
[ -n "$output" ] && [ "$format" = '%{http_code}' ] ||
    refuse "curl for the manifest $url: not -o FILE -w '%{http_code}'"
body=$(mktemp "$chain/tmp/manifest.XXXXXX")
status=0
code=$("$real" -o "$body" -w '%{http_code}' "${args[@]}" -- "$url") || status=$?
if ((status == 0)) && [[ $code =~ ^2[0-9][0-9]$ ]]; then
    actual=$(hash_file <"$body") || refuse "cannot hash the manifest sha256:$digest"
    [ "$actual" = "$digest" ] ||
        refuse "the registry answered manifest sha256:$digest with a manifest of sha256:$actual"
    mv -f -- "$body" "$chain/manifests/$digest"
    # What Enroot reads from it: the digests an index names, the config digest of a manifest
    # (the first line of its own jq program, as 3.x and as 4.x write it, and every config line).
    while IFS= read -r named; do
        [[ $named =~ ^sha256:([0-9a-f]{64})$ ]] && : >"$chain/named/${BASH_REMATCH[1]}"
    done < <(jq -r '(.manifests[]?.digest)? // empty' <"$chain/manifests/$digest" 2>/dev/null)
    config='(.config.digest | ltrimstr("sha256:"))? // empty'
    layers='([.layers[].digest | ltrimstr("sha256:")] | reverse | @tsv)?'
    media='(.layers[0].mediaType)? // empty'
    while IFS= read -r line; do
        [[ $line =~ ^[0-9a-f]{64}$ ]] && printf '%s\n' "$digest" >"$chain/configs/$line"
    done < <(
        for program in "$config" "$config, $layers" "$config, $media, $layers"; do
            jq -r "$program" <"$chain/manifests/$digest" 2>/dev/null | head -n 1
        done
        jq -r "$config" <"$chain/manifests/$digest" 2>/dev/null
    )
    cat -- "$chain/manifests/$digest" >"$output"
fi
# Any other answer passes its code and never its body: an unverified error body must not reach
# Enroot's jq (a 404 carrying an index would choose the next manifest).
printf '%s' "$code"
exit "$status"
"""

# Step 6c (import plans only): the verifying curl on Enroot's PATH, and what the job reads of it.
_CHAIN_STEP = r"""# 6c. The chain from the pinned digest to the bytes squashed. Enroot hashes no
# manifest: it checks each blob against the manifest the registry sent. Its curl during the
# import is the verifying curl below (README, Threat model); the job reads its verdict whatever
# the import did.
readonly CHAIN=$scratch/chain CHAIN_RECORD=$JOB_DIR/chain.json
real_curl=$(command -v curl) && [[ $real_curl == /* ]] ||
    die 78 "curl is missing in $JOB_PATH (Enroot's import needs it)"
command -v jq >/dev/null || die 78 "jq is missing in $JOB_PATH (Enroot's import needs it)"
mkdir -m 0700 -- "$CHAIN" "$CHAIN/bin" "$CHAIN/tmp" "$CHAIN/manifests" "$CHAIN/named" \
    "$CHAIN/configs" "$CHAIN/checked"
(set -C && cat >"$CHAIN/bin/curl") <<'@MARKER@'
@VERIFYING_CURL@@MARKER@
chmod 0500 -- "$CHAIN/bin/curl"
check_chain() {
    # check_chain STATUS: any refusal fails the job (79); a good import must have been seen.
    local status=$1 checked
    if [ -s "$CHAIN/verdict" ]; then
        die 79 "the registry's answer does not match the pinned digest sha256:$PINNED_HEX," \
            "or the image config names a path outside the root: $(head -c 2000 -- \
            "$CHAIN/verdict" | tr '\n' ' ')"
    fi
    ((status == 0)) || return 0
    [ -f "$CHAIN/manifests/$PINNED_HEX" ] ||
        die 79 "the import verified no manifest of the pinned digest sha256:$PINNED_HEX"
    checked=$(find "$CHAIN/checked" -mindepth 1 -maxdepth 1 -printf '%f\n')
    [[ $checked =~ ^[0-9a-f]{64}$ ]] ||
        die 79 "the import verified not exactly one image config for sha256:$PINNED_HEX"
    chain_config=$checked
    chain_manifest=$(head -n 1 -- "$CHAIN/configs/$chain_config")
}
write_chain_record() {
    say "verified chain: pinned sha256:$PINNED_HEX, manifest sha256:$chain_manifest," \
        "config sha256:$chain_config"
    (set -C && printf '{"config": "sha256:%s", "manifest": "sha256:%s", "pinned": "sha256:%s"}\n' \
        "$chain_config" "$chain_manifest" "$PINNED_HEX" >"$CHAIN_RECORD") ||
        die 73 "cannot create $CHAIN_RECORD"
}
"""


def verifying_curl() -> str:
    """The verifying curl's program, as step 6c writes it."""
    return _VERIFYING_CURL.replace("@HASH_FILE@\n", HASH_FILE)


def verified_chain_step() -> str:
    """Step 6c with the verifying curl's text in place (and the one hash function in it)."""
    program = verifying_curl()
    return _CHAIN_STEP.replace("@VERIFYING_CURL@", program).replace(
        "@MARKER@", VERIFYING_CURL_MARKER
    )


# Step 6 is rendered for import plans only: an inspect script holds no ``enroot import`` at all.
_IMPORT = r"""# 6. Import into the attempt. -o writes through symlinks, dangling ones too.
for target in "$CANDIDATE" "$PARTIAL" "$CHAIN_RECORD"; do
    if [ -e "$target" ] || [ -L "$target" ]; then
        die 73 "$target already exists"
    fi
done
partial_owned=1
say "importing $source_uri"
run_import
if [ -L "$PARTIAL" ] || [ ! -f "$PARTIAL" ]; then
    die 66 "the import did not produce a regular file"
fi
mv -T -- "$PARTIAL" "$CANDIDATE"
partial_owned=0
write_chain_record
"""

# Step 1b (issue #14): no path is trusted before the directories on its way are checked: the
# workspace root and its parents (as written and as resolved) may be changed by nobody but the
# user and root, or are sticky; images/ down to the attempt, and what the job makes in it, are
# the user's own. The same rules as domain/paths.py (shared_/own_directory_problem).
CHAIN_TITLE = "# 1b. Trust no directory that another user could change (exit 71).\n"
_CHAIN_HEADER = (
    CHAIN_TITLE
    + r"""readonly WORKSPACE_ROOT=${JOB_DIR%/images/.tmp/jobs/*}
"""
)
# The rules of who may change a directory (paths.py's, in bash); the doctor uses them too.
CHAIN_RULES = r"""directory_problem() {
    # directory_problem PATH shared|own: what lets another user change PATH, or nothing. A
    # shared directory is followed if it is a symlink (its parent is checked on its own).
    local owner mode kind
    if [ "$2" = shared ]; then
        read -r owner mode kind < <(stat -L -c '%u %f %F' -- "$1" 2>/dev/null) || :
    else
        read -r owner mode kind < <(stat -c '%u %f %F' -- "$1" 2>/dev/null) || :
    fi
    if [ -z "${kind-}" ]; then
        echo "cannot be examined"
    elif [ "$kind" != directory ]; then
        echo "is a $kind, not a directory"
    elif [ "$2" = own ] && ((owner != EUID)); then
        echo "is owned by uid $owner, not by uid $EUID"
    elif ((owner != EUID && owner != 0)); then
        echo "is owned by uid $owner, neither by uid $EUID nor by root"
    elif (((16#$mode) & 8#022)) && ! (((16#$mode) & 8#1000)); then
        echo "is writable by group or others without the sticky bit"
    fi
}
check_directory() {
    local problem
    problem=$(directory_problem "$1" "$2")
    [ -z "$problem" ] || die 71 "$1 $problem"
}
check_shared_chain() {
    # the directory PATH and every one on its way, as written and as resolved
    local path=$1 real prefix part
    real=$(realpath -e -- "$path") || die 71 "$path cannot be resolved"
    for path in "$path" "$real"; do
        check_directory / shared
        prefix=""
        while IFS= read -r -d / part; do
            [ -n "$part" ] || continue
            prefix=$prefix/$part
            check_directory "$prefix" shared
        done <<<"${path#/}/"
    done
}
"""
_CHAIN_CHECKS = r"""check_shared_chain "$WORKSPACE_ROOT"
for directory in images images/.tmp images/.tmp/jobs "images/.tmp/jobs/$LIFECYCLE_ID"; do
    check_directory "$WORKSPACE_ROOT/$directory" own
done
[ "$WORKSPACE_ROOT/images/.tmp/jobs/$LIFECYCLE_ID" = "$JOB_DIR" ] ||
    die 71 "$JOB_DIR is not an attempt directory of $WORKSPACE_ROOT"
for directory in "$OUTPUT_DIR" "$JOB_HOME" "$JOB_DIR/enroot"; do
    if [ -e "$directory" ] || [ -L "$directory" ]; then
        check_directory "$directory" own
    fi
done

"""
_CHECK_CHAIN = _CHAIN_HEADER + CHAIN_RULES + _CHAIN_CHECKS

# Step 8b (issue #14): Enroot's `start` reads the root's etc/fstab and etc/environment and runs
# the system and user hooks on the host's view of the root, where an image's symlinks lead out
# of it (enroot.md, "What an untrusted image can make Enroot do"). The job neutralises the few
# host-side entry points in the root and starts with a configuration of its own: no hooks, no
# environ.d, only the system mounts below. architecture.md, "Untrusted images", says why.
_CONTAIN_IMAGE = r"""# 8b. The unpacked root configures nothing on the host. No code of the image
# has run yet, so nothing in the root changes under these checks.
readonly ROOTFS=$SANDBOX/data/$CONTAINER_NAME
readonly DEFAULT_IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if [ -L "$ROOTFS" ] || [ ! -d "$ROOTFS" ]; then
    die 76 "the unpacked root $ROOTFS is not a directory"
fi
chmod u+rwx -- "$ROOTFS"  # an image may ship read-only directories
# Enroot opens /.lock for writing and binds /.enroot through the host's view; the prefix is ours.
rm -rf --one-file-system -- "$ROOTFS/.lock" "$ROOTFS/.enroot" "$ROOTFS$CONTAINER_PREFIX"
if [ -L "$ROOTFS/etc" ] || { [ -e "$ROOTFS/etc" ] && [ ! -d "$ROOTFS/etc" ]; }; then
    say "the image's /etc is not a directory: it is replaced by an empty one"
    rm -f -- "$ROOTFS/etc"
fi
mkdir -p -m 0755 -- "$ROOTFS/etc"
chmod u+rwx -- "$ROOTFS/etc"
# Of the image's environment only PATH is kept (it finds the image's python3, e.g. a venv), and
# only when it is plain absolute directories: Enroot would expand ${VAR} in it on the host.
image_path=$DEFAULT_IMAGE_PATH
if [ -f "$ROOTFS/etc/environment" ] && [ ! -L "$ROOTFS/etc/environment" ]; then
    found=""
    while IFS= read -r line || [ -n "$line" ]; do
        line=${line#export }
        case $line in
            PATH=*) found=${line#PATH=} ;;
        esac
    done < <(head -c 65536 -- "$ROOTFS/etc/environment")
    found=${found#[\"\']}
    found=${found%[\"\']}
    if ((${#found} <= 4096)) && [[ $found =~ ^/[A-Za-z0-9._+@/-]*(:/[A-Za-z0-9._+@/-]*)*$ ]]; then
        image_path=$found
    elif [ -n "$found" ]; then
        say "the image's PATH is not plain absolute directories: $DEFAULT_IMAGE_PATH is used"
    fi
fi
rm -rf --one-file-system -- "$ROOTFS/etc/fstab" "$ROOTFS/etc/environment"

# Enroot's own configuration for this start: the stock system mounts the inspector needs, and
# nothing else (the site's hooks.d and mounts.d are trusted for GPU jobs, not for this image).
readonly START_CONF=$SANDBOX/start
readonly start_sysconf=$START_CONF/sysconf start_config=$START_CONF/config
mkdir -m 0700 -- "$START_CONF" "$start_sysconf" "$start_config"
mkdir -m 0700 -- "$start_sysconf/hooks.d" "$start_sysconf/mounts.d" "$start_sysconf/environ.d"
: >"$start_sysconf/enroot.conf"
printf '%s\n' \
    '/proc /proc none x-create=dir,rbind,rw,nosuid,nodev,noexec' \
    '/dev/null /dev/null none x-create=file,bind,rw,nosuid,noexec' \
    '/dev/zero /dev/zero none x-create=file,bind,rw,nosuid,noexec' \
    '/dev/random /dev/random none x-create=file,bind,ro,nosuid,noexec' \
    '/dev/urandom /dev/urandom none x-create=file,bind,ro,nosuid,noexec' \
    >"$start_sysconf/mounts.d/10-system.fstab"
"""

_BODY = r"""
die() {
    local code=$1
    shift
    printf 'slurm-image: error: %s (exit %s)\n' "$*" "$code" >&2
    exit "$code"
}
say() {
    printf 'slurm-image: %s\n' "$*" >&2
}

# 1. An attempt directory is used once: a requeued run would find it dirty.
restart_count=${SLURM_RESTART_COUNT:-0}
[[ $restart_count =~ ^[0-9]+$ ]] || die 75 "SLURM_RESTART_COUNT is not a number"
# compared as text: 10#18446744073709551616 wraps to 0 in bash arithmetic
[[ $restart_count =~ ^0+$ ]] || die 75 "the job was requeued (SLURM_RESTART_COUNT=$restart_count)"
[[ ${SLURM_JOB_ID-} =~ ^[1-9][0-9]{0,9}$ ]] || die 64 "SLURM_JOB_ID is missing or not a job id"
readonly CONTAINER_NAME="slurm-image-$SLURM_JOB_ID"

@CHECK_CHAIN@
@HASH_FILE@

# 2. The staged inspector and rc file must be the bytes the plan names.
for pair in "$INSPECTOR:$INSPECTOR_SHA256" "$RC_FILE:$RC_SHA256"; do
    file=${pair%:*}
    expected=${pair##*:}
    if [ -L "$file" ] || [ ! -f "$file" ]; then
        die 70 "$file is not a regular file"
    fi
    actual=$(hash_file <"$file") || die 70 "cannot hash $file"
    [ "$actual" = "$expected" ] || die 70 "$file does not match its digest"
done

# 3. CPUs of the allocation (SLURM_CPUS_PER_TASK is only sbatch's request).
cpus=${SLURM_CPUS_ON_NODE-}
if [ -z "$cpus" ]; then
    cpus=${SLURM_JOB_CPUS_PER_NODE-}
    [[ $cpus =~ ^([0-9]+) ]] && cpus=${BASH_REMATCH[1]}
fi
[[ $cpus =~ ^[1-9][0-9]{0,4}$ ]] || die 64 "cannot tell the allocated CPU count (got '$cpus')"
export ENROOT_MAX_PROCESSORS=$cpus

# 4. Private, job-local scratch for Enroot (it needs mknod and trusted xattrs: not NFS/Lustre).
scratch_base=$LOCAL_SCRATCH
if [ -z "$scratch_base" ]; then
    scratch_base=/tmp
    if [[ ${NODE_TMPDIR-} =~ ^/[^[:space:][:cntrl:]]*$ ]] && [ -d "$NODE_TMPDIR" ]; then
        scratch_base=$NODE_TMPDIR
    fi
fi
unset NODE_TMPDIR

scratch=""
container_created=0
sandbox_pid=""
partial_owned=0
succeeded=0
cleanup() {
    local status=$?
    # Every step runs whatever the others do (errexit would end the trap at the first failure,
    # e.g. a directory the image planted at the result, leaving scratch behind and replacing
    # the exit code), and a second TERM or INT cannot cut it short.
    set +e
    trap '' TERM INT
    if [ -n "$sandbox_pid" ]; then
        # its init dies with it (--kill-child), and with its init every process of the image
        kill -KILL "$sandbox_pid" 2>/dev/null
        wait "$sandbox_pid" 2>/dev/null
    fi
    if ((container_created)); then
        env "${sandbox_paths[@]}" enroot remove -f "$CONTAINER_NAME" 9<&- >/dev/null 2>&1 ||
            say "could not remove container $CONTAINER_NAME"
    fi
    if ((partial_owned)) && [ -n "$PARTIAL" ]; then
        rm -f -- "$PARTIAL"
    fi
    rm -f -- "$JOB_ENROOT_CONFIG/.credentials"
    if ((!succeeded)); then
        rm -f -- "$RESULT"
    fi
    if [ -n "$scratch" ]; then
        rm -rf --one-file-system -- "$scratch"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

[ -d "$scratch_base" ] || die 1 "cannot create scratch in $scratch_base: not a directory"
check_shared_chain "$scratch_base"
scratch=$(mktemp -d "$scratch_base/slurm-image-$SLURM_JOB_ID.XXXXXX") ||
    die 1 "cannot create scratch in $scratch_base"
check_directory "$scratch" own
mkdir -m 0700 -- "$scratch/cache" "$scratch/data" "$scratch/temp" "$scratch/runtime"
mkdir -p -m 0700 -- "$JOB_HOME" "$JOB_ENROOT_CONFIG"
for directory in "$JOB_HOME" "$JOB_DIR/enroot" "$JOB_ENROOT_CONFIG"; do
    check_directory "$directory" own
done
export HOME=$JOB_HOME
export TMPDIR=$scratch/temp
export ENROOT_CONFIG_PATH=$JOB_ENROOT_CONFIG
export ENROOT_CACHE_PATH=$scratch/cache
export ENROOT_DATA_PATH=$scratch/data
export ENROOT_TEMP_PATH=$scratch/temp
export ENROOT_RUNTIME_PATH=$scratch/runtime
export ENROOT_LOGIN_SHELL=no
export ENROOT_MOUNT_HOME=no
export NVIDIA_VISIBLE_DEVICES=void
export MELLANOX_VISIBLE_DEVICES=void

# 5. Enroot's version on this node.
version_output=$(enroot version 2>/dev/null) ||
    die 78 "enroot version failed: is Enroot installed in $JOB_PATH?"
version_output=${version_output%$'\n'}
# At most 9 digits a part, so no arithmetic overflows; the parts are compared one by one.
[[ $version_output =~ ^([0-9]{1,9})\.([0-9]{1,9})\.([0-9]{1,9})([-+][0-9A-Za-z.+-]*)?$ ]] ||
    die 78 "cannot parse the Enroot version '$version_output'"
found_major=$((10#${BASH_REMATCH[1]}))
found_minor=$((10#${BASH_REMATCH[2]}))
found_patch=$((10#${BASH_REMATCH[3]}))
enroot_at_least() {
    # enroot_at_least X.Y.Z: whether the Enroot found is X.Y.Z or newer (call it as a condition)
    local major minor patch
    IFS=. read -r major minor patch <<<"$1"
    if ((found_major != major)); then
        ((found_major > major))
    elif ((found_minor != minor)); then
        ((found_minor > minor))
    else
        ((found_patch >= patch))
    fi
}
enroot_at_least "$MIN_ENROOT" ||
    die 78 "Enroot $version_output found; $OPERATION needs Enroot $MIN_ENROOT or newer"
if [ -z "${ENROOT_SQUASH_OPTIONS+set}" ]; then
    squash="-comp lzo -noD"
    if enroot_at_least 4.1.0; then
        squash="$squash -exit-on-error"
    fi
    export ENROOT_SQUASH_OPTIONS="$squash $SQUASH_MEMORY"
fi

# 5b. The image's side of the job runs in a sandbox: a user namespace whose root is an
# unprivileged host id (the job's user; for root's job SANDBOX_ID, with no groups: never host
# root) and a PID namespace whose init is the chain that execs down to the image's rc. When it
# ends, the kernel kills every process left in it, whatever it did to its root, its leader or
# /proc; --kill-child ends it with the job (README, Threat model).
if ((EUID == 0)); then
    readonly SANDBOX_OWNER=$SANDBOX_ID
    as_sandbox=(setpriv "--reuid=$SANDBOX_ID" "--regid=$SANDBOX_ID" --clear-groups --no-new-privs)
    chmod 0711 -- "$scratch"  # its own directory in there is the sandbox's; the rest stays 0700
else
    readonly SANDBOX_OWNER=$EUID
    as_sandbox=(setpriv --no-new-privs)
fi
sandbox=(unshare --user --map-root-user --pid --fork --kill-child --mount --mount-proc)
sandbox_problem() {
    # what keeps this node from running the image in its sandbox, or nothing
    local answer pid inner outer count
    answer=$(cd / && "${as_sandbox[@]}" "${sandbox[@]}" /bin/bash -pc \
        'echo "$$ $(cat /proc/self/uid_map)"; command -v enroot || echo "no enroot"' 2>&1 9<&-)
    read -r pid inner outer count <<<"$answer" || :
    if [ "$pid $inner $outer $count" != "1 0 $SANDBOX_OWNER 1" ]; then
        printf '%s\n' "${answer//[[:cntrl:]]/ }"
    elif [[ $answer == *$'\n'"no enroot" ]]; then
        printf 'uid %s finds no enroot it can run on %s\n' "$SANDBOX_OWNER" "$JOB_PATH"
    elif ! "${as_sandbox[@]}" test -x "$scratch" 9<&-; then
        printf 'uid %s cannot walk to the scratch %s\n' "$SANDBOX_OWNER" "$scratch"
    fi
}
# 5c. Without a sandbox the image does not run.
problem=$(sandbox_problem)
[ -z "$problem" ] || die 80 "this node cannot run the image in a sandbox (it needs util-linux" \
    "2.32 or newer for setpriv and unshare --kill-child --mount-proc, user namespaces, and a" \
    "scratch that uid $SANDBOX_OWNER can walk to): ${problem:0:300}"

@IMPORT@
# 7. Open the image once, after checking it cannot block (FIFO) or redirect (symlink).
if [ -L "$SQSH" ] || [ ! -f "$SQSH" ]; then
    die 66 "$SQSH is not a regular file"
fi
exec 9<"$SQSH"
# The descriptor is followed to the open file; the path never is, so a symlink swapped in after
# the check above reads as a different file even when it leads to the same one.
open_identity() {
    stat -L -c '%d:%i:%s:%.9Y:%.9Z:%F' /dev/fd/9
}
path_identity() {
    stat -c '%d:%i:%s:%.9Y:%.9Z:%F' -- "$SQSH"
}
fd_identity=$(open_identity) || die 66 "cannot stat the open image"
path_identity=$(path_identity) || die 74 "$SQSH disappeared"
[ "$fd_identity" = "$path_identity" ] || die 74 "$SQSH changed while it was opened"
[[ $fd_identity == *:"regular file" ]] || die 66 "$SQSH is not a regular file"
# `enroot create` reopens its argument by path: a parent directory of $SQSH exchanged between the
# digest and the unpack would unpack other bytes, with the file's own identity unchanged. So
# the bytes hashed are copied, from the descriptor in the same pass, into the job's private
# scratch, and Enroot unpacks that copy (architecture.md, "Untrusted images").
readonly PRIVATE_SQSH=$scratch/image.sqsh
sqsh_sha256=$(tee -- "$PRIVATE_SQSH" <&9 | hash_file) ||
    die 65 "cannot compute the digest of $SQSH (or copy it into $scratch)"
say "image sha256 $sqsh_sha256"

check_identity() {
    local now
    now=$(path_identity) || die 74 "$SQSH disappeared during the job"
    [ "$now" = "$fd_identity" ] || die 74 "$SQSH changed during the job"
    now=$(open_identity) || die 74 "the open image is unreadable"
    [ "$now" = "$fd_identity" ] || die 74 "$SQSH changed during the job"
}

# 8. Unpack under a name of this job's own, into the sandbox's private directories: Enroot's,
# the copies of the inspector and rc file it reads, and the output the image writes. No Enroot
# command inherits fd 9: Enroot execs down to the image's shell, whose code could reopen
# /proc/self/fd/9 for writing.
readonly SANDBOX=$scratch/sandbox
mkdir -m 0700 -- "$SANDBOX"
mkdir -m 0700 -- "$SANDBOX/home" "$SANDBOX/data" "$SANDBOX/cache" "$SANDBOX/temp" \
    "$SANDBOX/runtime" "$SANDBOX/output"
sandbox_paths=("ENROOT_DATA_PATH=$SANDBOX/data" "ENROOT_CACHE_PATH=$SANDBOX/cache"
    "ENROOT_TEMP_PATH=$SANDBOX/temp" "ENROOT_RUNTIME_PATH=$SANDBOX/runtime")
container_created=1
env "${sandbox_paths[@]}" enroot create -f --name "$CONTAINER_NAME" "$PRIVATE_SQSH" 9<&-
rm -f -- "$PRIVATE_SQSH"
check_identity

@CONTAIN_IMAGE@
# 9. Run the inspector inside the sandbox, with exactly two mounts and never the job directory,
# under the job's own Enroot configuration (no hooks, no mounts or environment of the image's
# choosing). The sandbox reads copies of the inspector and rc file, checked again; for root's
# job everything it uses becomes SANDBOX_ID's (no image code has run yet).
cp -- "$INSPECTOR" "$SANDBOX/inspect_image.py"
cp -- "$RC_FILE" "$SANDBOX/enroot.rc"
if ((EUID == 0)); then
    chown -hR -- "$SANDBOX_ID:$SANDBOX_ID" "$SANDBOX"
fi
for pair in "$SANDBOX/inspect_image.py:$INSPECTOR_SHA256" "$SANDBOX/enroot.rc:$RC_SHA256"; do
    file=${pair%:*}
    actual=$(hash_file <"$file") || die 70 "cannot hash $file"
    [ "$actual" = "${pair##*:}" ] || die 70 "$file does not match its digest"
done
start_environment=(-e SHELL=/bin/sh -e "PATH=$image_path")
[ -z "$REQUIRE" ] || start_environment+=(-e "SLURM_IMAGE_REQUIRE=$REQUIRE")
inspector_mount=$SANDBOX/inspect_image.py:$CONTAINER_PREFIX/inspect_image.py
output_mount=$SANDBOX/output:$CONTAINER_PREFIX/output
set +e
(
    cd / && exec "${as_sandbox[@]}" env "${sandbox_paths[@]}" "HOME=$SANDBOX/home" \
        "TMPDIR=$SANDBOX/temp" "ENROOT_SYSCONF_PATH=$start_sysconf" \
        "ENROOT_CONFIG_PATH=$start_config" "${sandbox[@]}" \
        enroot start --root --rc "$SANDBOX/enroot.rc" "${start_environment[@]}" \
        -m "$inspector_mount:x-create=file,bind,ro,nosuid,nodev,noexec" \
        -m "$output_mount:x-create=dir,bind,rw,nosuid,nodev,noexec" \
        "$CONTAINER_NAME" -- "$ROLE" "$sqsh_sha256" "$CONTAINER_PREFIX/output/inspection.json"
) 9<&- </dev/null &
sandbox_pid=$!
wait "$sandbox_pid"
status=$?
sandbox_pid=""
set -e
((status != 69)) || die 69 "the image has no usable python3 (3.8 or newer)"
((status == 0)) || die 76 "the inspection failed with status $status"

# 10. The image must not have changed. Its result leaves the sandbox (gone now, and every
# process with it) as a copy: a regular file, never through a symlink, within its bound.
check_identity
readonly SANDBOX_RESULT=$SANDBOX/output/inspection.json
if [ -L "$SANDBOX_RESULT" ] || [ ! -f "$SANDBOX_RESULT" ]; then
    die 76 "no inspection result (the inspector wrote no regular file)"
fi
exec 8<"$SANDBOX_RESULT"
read -r result_size result_kind < <(stat -L -c '%s %F' /dev/fd/8) || :
if [ "${result_kind-}" != "regular file" ] || ((result_size > RESULT_MAX_BYTES)); then
    die 76 "no inspection result (not a non-empty regular file of at most $RESULT_MAX_BYTES bytes)"
fi
mkdir -p -m 0700 -- "$OUTPUT_DIR"
check_directory "$OUTPUT_DIR" own
(set -C && head -c "$RESULT_MAX_BYTES" <&8 >"$RESULT") || die 76 "cannot write $RESULT"
exec 8<&-
succeeded=1
say "done: $OPERATION of $SQSH ($sqsh_sha256)"
"""


def body_section(start: str, end: str) -> str:
    """The lifecycle job's text from ``start`` up to ``end``, for a job that must run the very
    same steps (the doctor's); a ValueError if the renderer no longer has them."""
    first = _BODY.index(start)
    return _BODY[first : _BODY.index(end, first)]
