# 8. The sandbox's private directories: Enroot's, the copies of the inspector and rc file it
# reads, and the output the image writes. On the unpack path Enroot unpacks the private copy
# under a name of this job's own. No Enroot command inherits fd 9: Enroot execs down to the
# image's shell, whose code could reopen /proc/self/fd/9 for writing.
progress inspect
readonly SANDBOX=$scratch/sandbox
readonly ROOTFS=$SANDBOX/data/$CONTAINER_NAME
mkdir -m 0700 -- "$SANDBOX"
mkdir -m 0700 -- "$SANDBOX/home" "$SANDBOX/data" "$SANDBOX/cache" "$SANDBOX/temp" \
    "$SANDBOX/runtime" "$SANDBOX/output"
sandbox_paths=("ENROOT_DATA_PATH=$SANDBOX/data" "ENROOT_CACHE_PATH=$SANDBOX/cache"
    "ENROOT_TEMP_PATH=$SANDBOX/temp" "ENROOT_RUNTIME_PATH=$SANDBOX/runtime")
unpack_image() {
    if [ ! -f "$PRIVATE_SQSH" ]; then
        # the overlay path failed before any code of the image ran: the copy is a second read
        # of the descriptor, and must be the bytes hashed
        local copied
        copied=$(tee -- "$PRIVATE_SQSH" </dev/fd/9 | hash_file) ||
            die 65 "cannot copy $SQSH into $scratch"
        [ "$copied" = "$sqsh_sha256" ] || die 74 "$SQSH changed during the job"
    fi
    container_created=1
    env "${sandbox_paths[@]}" enroot create -f --name "$CONTAINER_NAME" "$PRIVATE_SQSH" 9<&-
    rm -f -- "$PRIVATE_SQSH"
    check_identity
}
if [ "$inspected_by" = unpacked ]; then
    unpack_image
fi

