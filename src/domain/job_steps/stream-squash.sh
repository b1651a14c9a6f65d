# The stream importer's squash (docs/enroot.md, section 16): the blobs fetched for the import,
# each checked against the digest it was fetched by, then merged by merge_layers.py straight
# into tar2sqfs. Nothing is unpacked: the space it takes is the compressed blobs and the image.
stream_tools() {
    # STREAM_TOOLS (python3, tar2sqfs) on the job's PATH, else exit 85 naming the one missing
    local tool
    for tool in "${STREAM_TOOLS[@]}"; do
        command -v "$tool" >/dev/null ||
            die 85 "$tool is missing in $JOB_PATH (the stream importer needs it)"
    done
}
verify_blob() {
    # verify_blob FILE HEX: the blob's bytes must hash to the digest it was fetched by (exit 79)
    local actual
    actual=$(hash_file <"$1") || die 79 "cannot hash the blob sha256:$2"
    [ "$actual" = "$2" ] ||
        die 79 "the registry answered blob sha256:$2 with bytes of sha256:$actual"
}
stream_compressor() {
    # tar2sqfs's compressor options for ENROOT_SQUASH_OPTIONS, one a line: the compressor its
    # -comp names (without one, mksquashfs's own default, gzip; unset, Enroot's default
    # options, lzo) and, with -noD (Enroot's default too: data blocks stored as they are), that
    # compressor's fastest setting, since tar2sqfs compresses every block (lzo: lzo1x_1, whose
    # level must be 0; every lzo variant reads back alike).
    # mksquashfs's other options have no counterpart (-mem: tar2sqfs keeps a bounded queue).
    local words compressor=gzip plain_data="" i
    if [ -n "${ENROOT_SQUASH_OPTIONS+set}" ]; then
        read -r -a words <<<"$ENROOT_SQUASH_OPTIONS"
    else
        words=(-comp lzo -noD)
    fi
    for ((i = 0; i < ${#words[@]}; i++)); do
        case ${words[i]} in
        -comp) ((i + 1 == ${#words[@]})) || compressor=${words[i + 1]} ;;
        -noD | -noDataCompression) plain_data=yes ;;
        esac
    done
    printf '%s\n' -c "$compressor"
    [ -n "$plain_data" ] || return 0
    case $compressor in
    lzo) printf '%s\n' -X algorithm=lzo1x_1,level=0 ;;
    gzip | zstd) printf '%s\n' -X level=1 ;;
    xz | lzma) printf '%s\n' -X level=0 ;;
    esac
}
stream_squash() {
    # stream_squash OUTPUT CONFIG URI LAYER...: the merged root into OUTPUT, which must not
    # exist. tar2sqfs ends a truncated stream as a whole one, so the merger's status is read
    # on its own; either failing removes OUTPUT (exit 86).
    local output=$1 compressor=() statuses
    shift
    mapfile -t compressor < <(stream_compressor)
    (set -C && : >"$output") || die 73 "cannot create $output"
    if python3 -I -B -- "$STREAMER" "$@" |
        tar2sqfs -q -f "${compressor[@]}" -j "${ENROOT_MAX_PROCESSORS:-1}" -- "$output" >&2; then
        return 0
    else
        statuses=("${PIPESTATUS[@]}")
    fi
    rm -f -- "$output"
    if ((statuses[1] != 0)); then
        die 86 "tar2sqfs failed with status ${statuses[1]} (compressor options: ${compressor[*]})"
    fi
    die 86 "merging the image's layers failed (merge_layers.py exited ${statuses[0]})"
}
