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
# shellcheck disable=SC2174 # only output is made: the attempt directory exists
mkdir -p -m 0700 -- "$OUTPUT_DIR"
check_directory "$OUTPUT_DIR" own
(set -C && head -c "$RESULT_MAX_BYTES" <&8 >"$RESULT") || die 76 "cannot write $RESULT"
exec 8<&-
succeeded=1
say "done: $OPERATION of $SQSH ($sqsh_sha256)"
