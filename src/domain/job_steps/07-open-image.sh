# 7. Open the image once, after checking it cannot block (FIFO) or redirect (symlink).
if [ -L "$SQSH" ] || [ ! -f "$SQSH" ]; then
    die 66 "$SQSH is not a regular file"
fi
if [ -e "$INSPECTION_PATH_RECORD" ] || [ -L "$INSPECTION_PATH_RECORD" ]; then
    die 73 "$INSPECTION_PATH_RECORD already exists"
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
# The one full read of the image is its digest. `enroot create` reopens its argument by path: a
# parent directory of $SQSH exchanged between the digest and the unpack would unpack other
# bytes, with the file's own identity unchanged. So on the unpack path the bytes hashed are
# copied, from the descriptor in the same pass, into the job's private scratch, and Enroot
# unpacks that copy; the overlay path mounts /dev/fd/9, the very file hashed (docs/trust.md,
# "Untrusted images").
readonly PRIVATE_SQSH=$scratch/image.sqsh
path_choice=$(inspection_path)
inspection_reason=${path_choice#*: }
progress_reading hash 9 "$(stat -L -c %s /dev/fd/9)"
if [[ $path_choice == overlay:* ]]; then
    inspected_by=overlay
    overlay_kind=$inspection_reason
    sqsh_sha256=$(hash_file <&9) || die 65 "cannot compute the digest of $SQSH"
else
    inspected_by=unpacked
    sqsh_sha256=$(tee -- "$PRIVATE_SQSH" <&9 | hash_file) ||
        die 65 "cannot compute the digest of $SQSH (or copy it into $scratch)"
fi
say "image sha256 $sqsh_sha256"

check_identity() {
    local now
    now=$(path_identity) || die 74 "$SQSH disappeared during the job"
    [ "$now" = "$fd_identity" ] || die 74 "$SQSH changed during the job"
    now=$(open_identity) || die 74 "the open image is unreadable"
    [ "$now" = "$fd_identity" ] || die 74 "$SQSH changed during the job"
}

# Which way the image was inspected, in the attempt (where the image cannot write).
write_inspection_path_record() {
    local reason=${inspection_reason//[\"\\[:cntrl:]]/}
    (set -C && printf '{"path": "%s", "reason": "%s"}\n' "$inspected_by" "$reason" \
        >"$INSPECTION_PATH_RECORD") || die 73 "cannot create $INSPECTION_PATH_RECORD"
}

