# The download's counters for the job's progress: the layers the verified image manifest lists
# (digest and size), those already in Enroot's cache (which it does not fetch) and those
# fetched whole so far; bytes count whole layers.
progress_layers() {
    # progress_layers MANIFEST: after a manifest is verified; an index lists no layers
    local listing digest size
    listing=$(jq -r '(.layers[]? | [(.digest | strings | ltrimstr("sha256:")),
        ((.size | numbers) // 0)] | @tsv)' <"$1" 2>/dev/null) || return 0
    [ -n "$listing" ] && mkdir -p -- "$chain/progress/fetched" 2>/dev/null || return 0
    printf '%s\n' "$listing" >"$chain/progress/layers"
    while IFS=$'\t' read -r digest size; do
        if [[ $digest =~ ^[0-9a-f]{64}$ ]] && [ -f "${ENROOT_CACHE_PATH-}/$digest" ]; then
            : >"$chain/progress/fetched/$digest"
        fi
    done <"$chain/progress/layers"
    progress_download
}
progress_blob() {
    # progress_blob URL CURL-ARGUMENTS...: a layer the manifest lists is fetched here and
    # counted once whole (the wrapper ends with curl's status); anything else returns
    local url=$1 digest
    shift
    [[ $url =~ /blobs/sha256:([0-9a-f]{64})$ ]] || return 0
    digest=${BASH_REMATCH[1]}
    [ -f "$chain/progress/layers" ] && grep -q "^$digest"$'\t' -- "$chain/progress/layers" ||
        return 0
    "$real" "$@" || exit "$?"
    : >"$chain/progress/fetched/$digest" 2>/dev/null || exit 0
    progress_download
    exit 0
}
progress_download() {
    # Enroot fetches layers in parallel: one writer at a time counts and writes
    local digest size lock layers=0 fetched=0 bytes=0 fetched_bytes=0
    if command -v flock >/dev/null 2>&1 && exec {lock}>>"$chain/progress/lock"; then
        flock "$lock" || :
    fi
    while IFS=$'\t' read -r digest size; do
        [[ $digest =~ ^[0-9a-f]{64}$ && $size =~ ^[0-9]{1,15}$ ]] || continue
        layers=$((layers + 1)) bytes=$((bytes + size))
        if [ -e "$chain/progress/fetched/$digest" ]; then
            fetched=$((fetched + 1)) fetched_bytes=$((fetched_bytes + size))
        fi
    done <"$chain/progress/layers"
    progress download layers_done="$fetched" layers_total="$layers" \
        bytes_done="$fetched_bytes" bytes_total="$bytes"
}
