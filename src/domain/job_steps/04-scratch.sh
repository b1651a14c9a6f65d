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
        rm -rf --one-file-system -- "$scratch"
    fi
    progress_end "$status"
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

