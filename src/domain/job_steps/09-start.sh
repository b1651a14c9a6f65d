# 9. Run the inspector inside the sandbox, with exactly two mounts and never the job directory,
# under the job's own Enroot configuration (no hooks, no mounts or environment of the image's
# choosing). The sandbox reads copies of the inspector and rc file, checked again; for root's
# job everything it uses becomes SANDBOX_ID's (no image code has run yet).
cp -- "$INSPECTOR" "$SANDBOX/inspect_image.py"
cp -- "$RC_FILE" "$SANDBOX/enroot.rc"
if ((EUID == 0)); then
    chown -hR -- "$SANDBOX_ID:$SANDBOX_ID" "$SANDBOX"
fi
for pair in "$SANDBOX/inspect_image.py:$INSPECTOR_SHA256" "$SANDBOX/enroot.rc:$RC_SHA256"; do
    file=${pair%:*}
    actual=$(hash_file <"$file") || die 70 "cannot hash $file"
    [ "$actual" = "${pair##*:}" ] || die 70 "$file does not match its digest"
done
# `enroot start --root` takes these four, then -e PATH=<the image's PATH> (contain_root's, on the
# overlay path the stage's), then the rest
start_arguments=(--rc "$SANDBOX/enroot.rc" -e SHELL=/bin/sh)
start_rest=()
[ -z "$REQUIRE" ] || start_rest+=(-e "SLURM_IMAGE_REQUIRE=$REQUIRE")
inspector_mount=$SANDBOX/inspect_image.py:$CONTAINER_PREFIX/inspect_image.py
output_mount=$SANDBOX/output:$CONTAINER_PREFIX/output
start_rest+=(
    -m "$inspector_mount:x-create=file,bind,ro,nosuid,nodev,noexec"
    -m "$output_mount:x-create=dir,bind,rw,nosuid,nodev,noexec"
    "$CONTAINER_NAME" -- "$ROLE" "$sqsh_sha256" "$CONTAINER_PREFIX/output/inspection.json"
)
start_environment=("${sandbox_paths[@]}" "HOME=$SANDBOX/home" "TMPDIR=$SANDBOX/temp"
    "ENROOT_SYSCONF_PATH=$start_sysconf" "ENROOT_CONFIG_PATH=$start_config")
# the sandbox runs in the background so that the job's TERM trap kills it at once; its stdin is
# /dev/null, its stdout and stderr the pipe of the image's output (step image-output)
run_sandbox() {
    start_image_output
    set +e
    if [ "$inspected_by" = overlay ]; then
        (
            cd / && exec "${as_sandbox[@]}" env "${start_environment[@]}" \
                "STAGE_OVERLAY=$overlay_kind" "STAGE_ROOTFS=$ROOTFS" \
                "STAGE_LAYERS=$SANDBOX/layers" "STAGE_PREFIX=$CONTAINER_PREFIX" \
                "${sandbox[@]}" /bin/bash -p "$STAGE" "${start_arguments[@]}" "${start_rest[@]}"
        ) 8>"$STAGE_STATE" </dev/null >&7 2>&7 7>&- &
    else
        (
            cd / && exec "${as_sandbox[@]}" env "${start_environment[@]}" "${sandbox[@]}" \
                enroot start --root "${start_arguments[@]}" -e "PATH=$image_path" \
                "${start_rest[@]}"
        ) 9<&- </dev/null >&7 2>&7 7>&- &
    fi
    sandbox_pid=$!
    wait "$sandbox_pid"
    status=$?
    sandbox_pid=""
    end_image_output
    set -e
}
if [ "$inspected_by" = overlay ]; then
    say "inspecting the mounted image through an overlay ($inspection_reason)"
else
    say "inspecting an unpacked copy of the image ($inspection_reason)"
fi
run_sandbox
if [ "$inspected_by" = overlay ] && [ "$(head -c 8 -- "$STAGE_STATE")" != mounted ]; then
    # nothing of the image ran: it is unpacked instead
    inspected_by=unpacked
    inspection_reason="the overlay could not be mounted (status $status)"
    say "inspecting an unpacked copy of the image ($inspection_reason)"
    unpack_image
    contain_root "$ROOTFS"
    run_sandbox
fi
write_inspection_path_record
((status != 69)) || die 69 "the image has no usable python3 (3.8 or newer)"
((status == 0)) || die 76 "the inspection failed with status $status"

