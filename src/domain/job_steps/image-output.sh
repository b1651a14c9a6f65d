# The image's output: everything the sandbox writes (Enroot's start, the stage, the image's code)
# reaches the job's log only through a pipe the job reads, never through a descriptor on a file
# outside the sandbox, which the image could truncate, seek or fill. Each line gets the prefix
# "image: ", so that none reads as the job's own; control characters but tab are escaped
# (\xHH; a C1 control in UTF-8 as \xc2\xHH); a line is cut after IMAGE_LINE_MAX_BYTES; the copy
# stops after IMAGE_OUTPUT_MAX_BYTES, and one line says how much more was dropped (it is read all
# the same: the image never blocks on a full pipe). dd reads no byte past the bound and, like
# sed -u, passes on what it gets at once: each line reaches the log as the image writes it.
readonly IMAGE_OUTPUT_MAX_BYTES=1048576 IMAGE_LINE_MAX_BYTES=4096
image_output_rules=(-e "s/^\(.\{$IMAGE_LINE_MAX_BYTES\}\).\{1,\}\$/\1 [cut]/")
for byte in {0..8} {11..31} 127; do
    printf -v hex '%02x' "$byte"
    image_output_rules+=(-e "s/\\x$hex/\\\\x$hex/g")
done
for byte in {128..159}; do
    printf -v hex '%02x' "$byte"
    image_output_rules+=(-e "s/\\xc2\\x$hex/\\\\xc2\\\\x$hex/g")
done
image_output_rules+=(-e 's/^/image: /')
readonly image_output_rules
# the loop ends the image's last line, should it have none, before the job's next one (sed's own
# way, the address $, would hold every line back until the next had begun)
copy_image_output() {
    local dropped line
    dd bs=4096 iflag=count_bytes count="$IMAGE_OUTPUT_MAX_BYTES" status=none |
        sed -u "${image_output_rules[@]}" | while IFS= read -r line || [ -n "$line" ]; do
            printf '%s\n' "$line"
        done >&2 || :
    dropped=$(wc -c) || dropped=0
    if ((dropped > 0)); then
        say "the image wrote more than $IMAGE_OUTPUT_MAX_BYTES bytes: $dropped more were dropped"
    fi
}
# fd 7: the pipe's write end, which the sandbox gets as its stdout and stderr and nothing else
# holds; its reader copies until the last process of the sandbox is gone.
start_image_output() {
    local pipe=$scratch/image-output
    mkfifo -m 0600 -- "$pipe"
    copy_image_output <"$pipe" &
    image_output_pid=$!
    exec 7>"$pipe"
    rm -f -- "$pipe"
}
end_image_output() {
    [ -n "$image_output_pid" ] || return 0
    exec 7>&-
    wait "$image_output_pid" 2>/dev/null || :
    image_output_pid=""
}
