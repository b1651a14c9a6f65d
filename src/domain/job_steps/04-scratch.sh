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
image_output_pid=""
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
    # the last writer of the image's output is gone: what it wrote is in the log before the rest
    end_image_output
    if ((container_created)); then
        env "${sandbox_paths[@]}" enroot remove -f "$CONTAINER_NAME" 9<&- >/dev/null 2>&1 ||
            say "could not remove container $CONTAINER_NAME"
    fi
    if declare -F remove_own_tokens >/dev/null; then
        remove_own_tokens
    fi
    if ((partial_owned)) && [ -n "$PARTIAL" ]; then
        rm -f -- "$PARTIAL"
    fi
    rm -f -- "$JOB_ENROOT_CONFIG/.credentials"
    if ((!succeeded)); then
        rm -f -- "$RESULT"
    fi
    if [ -n "$scratch" ]; then
        remove_scratch
    fi
    if declare -F report_scratch_removed >/dev/null; then
        report_scratch_removed
    fi
    progress_end "$status"
    exit "$status"
}
# Enroot makes every mount point with mode 0 (enroot-mount's create_file), in the unpacked root
# or the overlay's upper layer, where fuse-overlayfs puts its opaque marker into it: rm alone
# cannot empty such a directory. Every directory is made searchable and writable first, in the
# order find walks them (-P: no symlink is followed; -xdev: nothing outside the scratch's file
# system), with no process of the image left to change them. What still stays is one line.
remove_scratch() {
    local left
    rm -rf --one-file-system -- "$scratch" 2>/dev/null && return 0
    find "$scratch" -xdev -type d ! -perm -u=rwx -exec chmod u+rwx -- {} \; 2>/dev/null
    rm -rf --one-file-system -- "$scratch" 2>/dev/null && return 0
    left=$(find "$scratch" -xdev -depth -print 2>/dev/null | head -n 1) || :
    say "could not remove the job's scratch $scratch: $(find "$scratch" -xdev 2>/dev/null |
        wc -l) entries are left, the first ${left//[[:cntrl:]]/?}"
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
# shellcheck disable=SC2174 # the parents -p makes are 0700 too, by umask 077
mkdir -p -m 0700 -- "$JOB_HOME" "$JOB_ENROOT_CONFIG"
for directory in "$JOB_HOME" "$JOB_ENROOT" "$JOB_ENROOT_CONFIG"; do
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

