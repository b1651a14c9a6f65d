# 8b. The unpacked root configures nothing on the host. No code of the image
# has run yet, so nothing in the root changes under these checks.
readonly ROOTFS=$SANDBOX/data/$CONTAINER_NAME
readonly DEFAULT_IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
if [ -L "$ROOTFS" ] || [ ! -d "$ROOTFS" ]; then
    die 76 "the unpacked root $ROOTFS is not a directory"
fi
chmod u+rwx -- "$ROOTFS"  # an image may ship read-only directories
# Enroot opens /.lock for writing and binds /.enroot through the host's view; the prefix is ours.
rm -rf --one-file-system -- "$ROOTFS/.lock" "$ROOTFS/.enroot" "$ROOTFS$CONTAINER_PREFIX"
if [ -L "$ROOTFS/etc" ] || { [ -e "$ROOTFS/etc" ] && [ ! -d "$ROOTFS/etc" ]; }; then
    say "the image's /etc is not a directory: it is replaced by an empty one"
    rm -f -- "$ROOTFS/etc"
fi
# shellcheck disable=SC2174 # only etc is made: the root exists
mkdir -p -m 0755 -- "$ROOTFS/etc"
chmod u+rwx -- "$ROOTFS/etc"
# Of the image's environment only PATH is kept (it finds the image's python3, e.g. a venv), and
# only when it is plain absolute directories: Enroot would expand ${VAR} in it on the host.
image_path=$DEFAULT_IMAGE_PATH
if [ -f "$ROOTFS/etc/environment" ] && [ ! -L "$ROOTFS/etc/environment" ]; then
    found=""
    while IFS= read -r line || [ -n "$line" ]; do
        line=${line#export }
        case $line in
            PATH=*) found=${line#PATH=} ;;
        esac
    done < <(head -c 65536 -- "$ROOTFS/etc/environment")
    found=${found#[\"\']}
    found=${found%[\"\']}
    if ((${#found} <= 4096)) && [[ $found =~ ^/[A-Za-z0-9._+@/-]*(:/[A-Za-z0-9._+@/-]*)*$ ]]; then
        image_path=$found
    elif [ -n "$found" ]; then
        say "the image's PATH is not plain absolute directories: $DEFAULT_IMAGE_PATH is used"
    fi
fi
rm -rf --one-file-system -- "$ROOTFS/etc/fstab" "$ROOTFS/etc/environment"

# Enroot's own configuration for this start: the stock system mounts the inspector needs, and
# nothing else (the site's hooks.d and mounts.d are trusted for GPU jobs, not for this image).
readonly START_CONF=$SANDBOX/start
readonly start_sysconf=$START_CONF/sysconf start_config=$START_CONF/config
mkdir -m 0700 -- "$START_CONF" "$start_sysconf" "$start_config"
mkdir -m 0700 -- "$start_sysconf/hooks.d" "$start_sysconf/mounts.d" "$start_sysconf/environ.d"
: >"$start_sysconf/enroot.conf"
printf '%s\n' \
    '/proc /proc none x-create=dir,rbind,rw,nosuid,nodev,noexec' \
    '/dev/null /dev/null none x-create=file,bind,rw,nosuid,noexec' \
    '/dev/zero /dev/zero none x-create=file,bind,rw,nosuid,noexec' \
    '/dev/random /dev/random none x-create=file,bind,ro,nosuid,noexec' \
    '/dev/urandom /dev/urandom none x-create=file,bind,ro,nosuid,noexec' \
    >"$start_sysconf/mounts.d/10-system.fstab"
