# 8b. The root configures nothing on the host (contain_root): the unpacked one here, the overlay
# inside the sandbox (the stage, step 8c).
if [ "$inspected_by" = unpacked ]; then
    contain_root "$ROOTFS"
fi

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
