# The download's counters for the job's progress: the layers the verified image manifest lists
# (digest and size), those already in Enroot's cache (which it does not fetch) and those
# fetched whole so far; bytes count those whole and, of a layer being fetched, what its curl has
# written so far (read every second from /proc/PID/io, never above the layer's size).
manifest_layers() {
    # manifest_layers MANIFEST: "DIGEST<tab>SIZE" (hex, bytes) of each layer it lists
    jq -r '(.layers[]? | [(.digest | strings | ltrimstr("sha256:")),
        ((.size | numbers) // 0)] | @tsv)' <"$1" 2>/dev/null
}
progress_layers() {
    # progress_layers MANIFEST: after a manifest is verified; an index lists no layers
    local listing digest size
    listing=$(manifest_layers "$1") || return 0
    [ -n "$listing" ] && mkdir -p -- "$chain/progress/fetched" "$chain/progress/fetching" \
        2>/dev/null || return 0
    printf '%s\n' "$listing" >"$chain/progress/layers"
    while IFS=$'\t' read -r digest size; do
        if [[ $digest =~ ^[0-9a-f]{64}$ ]] && [ -f "${ENROOT_CACHE_PATH-}/$digest" ]; then
            : >"$chain/progress/fetched/$digest"
        fi
    done <"$chain/progress/layers"
    progress_download
}
progress_blob() {
    # progress_blob URL CURL-ARGUMENTS...: a layer the manifest lists is fetched here, counted
    # as curl writes it and once whole (the wrapper ends with curl's status); anything else
    # returns
    local url=$1 digest
    shift
    [[ $url =~ /blobs/sha256:([0-9a-f]{64})$ ]] || return 0
    digest=${BASH_REMATCH[1]}
    [ -f "$chain/progress/layers" ] && grep -q "^$digest"$'\t' -- "$chain/progress/layers" ||
        return 0
    local fetcher ticker status=0
    "$real" "$@" &
    fetcher=$!
    # shellcheck disable=SC2064 # the pids are known now
    trap "kill -TERM $fetcher \${ticker-} 2>/dev/null; exit 143" TERM INT HUP
    progress_fetching "$digest" "$fetcher" </dev/null >/dev/null 2>&1 &
    ticker=$!
    wait "$fetcher" || status=$?
    kill "$ticker" 2>/dev/null || :
    wait "$ticker" 2>/dev/null || :
    trap - TERM INT HUP
    rm -f -- "$chain/progress/fetching/$digest"
    ((status == 0)) || exit "$status"
    : >"$chain/progress/fetched/$digest" 2>/dev/null || exit 0
    progress_download
    exit 0
}
progress_fetching() {
    # progress_fetching DIGEST PID: every second, what curl PID has written of the layer so far
    local digest=$1 pid=$2 value last=0
    while sleep 1; do
        value=$(proc_field "/proc/$pid/io" wchar:) || return 0
        ((value > last)) || continue
        last=$value
        printf '%s\n' "$value" >"$chain/progress/fetching/$digest.$BASHPID" &&
            mv -f -- "$chain/progress/fetching/$digest.$BASHPID" \
                "$chain/progress/fetching/$digest" || return 0
        progress_download
    done
}
progress_download() {
    # Enroot fetches layers in parallel: one writer at a time counts and writes
    local digest size lock partial layers=0 fetched=0 bytes=0 fetched_bytes=0
    if command -v flock >/dev/null 2>&1 && exec {lock}>>"$chain/progress/lock"; then
        flock "$lock" || :
    fi
    while IFS=$'\t' read -r digest size; do
        [[ $digest =~ ^[0-9a-f]{64}$ && $size =~ ^[0-9]{1,15}$ ]] || continue
        layers=$((layers + 1)) bytes=$((bytes + size))
        if [ -e "$chain/progress/fetched/$digest" ]; then
            fetched=$((fetched + 1)) fetched_bytes=$((fetched_bytes + size))
        elif read -r partial 2>/dev/null <"$chain/progress/fetching/$digest" &&
            [[ $partial =~ ^[0-9]{1,18}$ ]]; then
            fetched_bytes=$((fetched_bytes + (partial < size ? partial : size)))
        fi
    done <"$chain/progress/layers"
    progress download layers_done="$fetched" layers_total="$layers" \
        bytes_done="$fetched_bytes" bytes_total="$bytes"
    [ -z "${lock-}" ] || exec {lock}>&-
}
