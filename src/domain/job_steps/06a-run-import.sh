# 6a. Enroot 3.x refuses REG#IMAGE@sha256:... and misreads
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
    # Enroot's own output is kept to tell a zstd refusal from other failures (its phases are
    # recorded as it prints them), then shown. Its curl is the verifying one of step 6c, for
    # this command alone. -a always: without it Enroot picks this node's architecture from an
    # index.
    local status=0 log=$scratch/import.log
    # A subshell that records its pid, then becomes Enroot: that pid names Enroot's registry
    # tokens (<registry>.$$), which step 4b removes.
    {
        (
            export PATH=$CHAIN/bin:$PATH SLURM_IMAGE_CHAIN=$CHAIN SLURM_IMAGE_CURL=$real_curl \
                SLURM_IMAGE_PIN=$PINNED_HEX SLURM_IMAGE_ARCH=$architecture_oci \
                SLURM_IMAGE_CACHE=$ENROOT_CACHE_PATH SLURM_IMAGE_PROGRESS=$PROGRESS
            printf '%s\n' "$BASHPID" >"$IMPORT_PID"
            exec enroot import -a "$architecture" -o "$PARTIAL" "$source_uri"
        ) 2>&1 >&3 3>&- | progress_enroot "$log"
    } 3>&1 || status=$?
    remove_credentials
    cat -- "$log" >&2
    check_chain "$status"
    ((status == 0)) || import_failed "$status" "$log"
}
