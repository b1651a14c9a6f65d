# 8. Unpack under a name of this job's own, into the sandbox's private directories: Enroot's,
# the copies of the inspector and rc file it reads, and the output the image writes. No Enroot
# command inherits fd 9: Enroot execs down to the image's shell, whose code could reopen
# /proc/self/fd/9 for writing.
progress inspect
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

