# Which way the image is inspected (the job's and the doctor's one rule): "overlay" mounts the
# .sqsh read-only with squashfuse and an overlay above it inside the sandbox, reading only what
# the inspector touches; "unpacked" has `enroot create` unpack a private copy. Root's job always
# unpacks: its sandbox id cannot open a root-owned image, and a FUSE daemon parsing an untrusted
# squashfs never runs as host root. Prints the overlay kind (fuse-overlayfs or native), or the
# reason for unpacking after "unpacked: ".
inspection_path() {
    local overlay=""
    if ((EUID == 0)); then
        echo "unpacked: root's job (its FUSE daemons would run as host root)"
        return
    fi
    if ! command -v squashfuse >/dev/null 2>&1; then
        echo "unpacked: no squashfuse on $JOB_PATH"
        return
    fi
    if ! command -v mountpoint >/dev/null 2>&1; then
        echo "unpacked: no mountpoint on $JOB_PATH"
        return
    fi
    if [ ! -c /dev/fuse ] || [ ! -r /dev/fuse ] || [ ! -w /dev/fuse ]; then
        echo "unpacked: uid $EUID cannot open /dev/fuse"
        return
    fi
    if command -v fuse-overlayfs >/dev/null 2>&1; then
        overlay=fuse-overlayfs
    elif grep -qw overlay /proc/filesystems 2>/dev/null; then
        overlay=native
    else
        echo "unpacked: neither fuse-overlayfs on $JOB_PATH nor overlayfs in the kernel"
        return
    fi
    echo "overlay: $overlay"
}
