# The doctor's report: one line per fact, read by the login node.
report() {
    local value=${2%%$'\n'*}
    printf 'slurm-image-doctor: %s=%s\n' "$1" "${value//[[:cntrl:]]/}"
}
report node "$(uname -n 2>/dev/null || :)"
report job_path "$JOB_PATH"
version_output=$(enroot version 2>/dev/null) || version_output=""
report enroot_version "$version_output"
for tool in enroot mksquashfs unsquashfs tar2sqfs python3; do
    report "$tool" "$(command -v "$tool" || true)"
done
report scratch "$scratch_base"
if space=$(stat -f -c '%a %S %T' -- "$scratch_base"); then
    read -r blocks block_size filesystem <<<"$space"
    report scratch_free_bytes "$((blocks * block_size))"
    report scratch_filesystem "$filesystem"
fi
report job_uid "$EUID"
report sandbox_uid "$SANDBOX_OWNER"
problem=$(sandbox_problem)
report sandbox "${problem:-ok}"
report inspection_path "$(inspection_path)"
report architecture "$node_architecture"
for entry in "${ARCHITECTURES[@]}"; do
    name=${entry%%:*}
    [ "$name" != "$node_architecture" ] || continue
    problem=$(architecture_problem "$name")
    report "runs_$name" "${problem:-ok}"
done
# What Enroot and fuse-overlayfs leave in a real job's scratch: a mount point of mode 0 with the
# overlay's opaque marker in it. The EXIT trap removes the scratch all the same, and says so.
mkdir -p -- "$scratch/temp/upper/mountpoint"
: >"$scratch/temp/upper/mountpoint/.wh..wh..opq"
chmod 0 -- "$scratch/temp/upper/mountpoint"
report_scratch_removed() {
    if [ -e "$scratch" ]; then
        report scratch_removed "no: $(find "$scratch" -xdev 2>/dev/null | wc -l) entries left"
    else
        report scratch_removed ok
    fi
}
succeeded=1
