lower=$layers/lower upper=$layers/upper work=$layers/work
mkdir -m 0700 -- "$layers" "$lower" "$upper" "$work"
mounted() {
    # a FUSE daemon's mount is in place; its exit, or 10 s, is a failure
    local pid=$1 target=$2 tries=0
    until mountpoint -q -- "$target"; do
        kill -0 "$pid" 2>/dev/null && ((tries++ < 1000)) || return 1
        sleep 0.01
    done
}
squashfuse -f -o ro,uid=0,gid=0 /dev/fd/9 "$lower" 8>&- </dev/null &
mounted $! "$lower" || die 1 "squashfuse cannot mount the image"
if [ "$overlay" = native ]; then
    mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work,xino=off" \
        "$ROOTFS" 8>&- 9<&- || die 1 "cannot mount an overlay above the image"
else
    FUSE_OVERLAYFS_DISABLE_OVL_WHITEOUT=y fuse-overlayfs -f \
        -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$ROOTFS" 8>&- 9<&- </dev/null &
    mounted $! "$ROOTFS" || die 1 "fuse-overlayfs cannot mount an overlay above the image"
fi
exec 9<&-
echo mounted >&8
exec 8>&-
contain_root "$ROOTFS"
# the job's start arguments: --rc FILE -e SHELL=..., then the image's PATH goes, then the rest
exec unshare --pid --fork --kill-child --mount-proc \
    enroot start --root "${@:1:4}" -e "PATH=$image_path" "${@:5}"
