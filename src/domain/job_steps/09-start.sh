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
start_environment=(-e SHELL=/bin/sh -e "PATH=$image_path")
[ -z "$REQUIRE" ] || start_environment+=(-e "SLURM_IMAGE_REQUIRE=$REQUIRE")
inspector_mount=$SANDBOX/inspect_image.py:$CONTAINER_PREFIX/inspect_image.py
output_mount=$SANDBOX/output:$CONTAINER_PREFIX/output
set +e
(
    cd / && exec "${as_sandbox[@]}" env "${sandbox_paths[@]}" "HOME=$SANDBOX/home" \
        "TMPDIR=$SANDBOX/temp" "ENROOT_SYSCONF_PATH=$start_sysconf" \
        "ENROOT_CONFIG_PATH=$start_config" "${sandbox[@]}" \
        enroot start --root --rc "$SANDBOX/enroot.rc" "${start_environment[@]}" \
        -m "$inspector_mount:x-create=file,bind,ro,nosuid,nodev,noexec" \
        -m "$output_mount:x-create=dir,bind,rw,nosuid,nodev,noexec" \
        "$CONTAINER_NAME" -- "$ROLE" "$sqsh_sha256" "$CONTAINER_PREFIX/output/inspection.json"
) 9<&- </dev/null &
sandbox_pid=$!
wait "$sandbox_pid"
status=$?
sandbox_pid=""
set -e
((status != 69)) || die 69 "the image has no usable python3 (3.8 or newer)"
((status == 0)) || die 76 "the inspection failed with status $status"

