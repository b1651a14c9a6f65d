# The root the image runs in configures nothing on the host (README, Threat model), whichever
# way it was made (unpacked, or the overlay above the mounted image). No code of the image has
# run yet, so nothing in the root changes under these checks. Sets image_path: of the image's
# environment only PATH is kept (it finds the image's python3, e.g. a venv), and only when it is
# plain absolute directories: Enroot would expand ${VAR} in it on the host.
readonly DEFAULT_IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
contain_root() {
    local root=$1 found line
    if [ -L "$root" ] || [ ! -d "$root" ]; then
        die 76 "the image's root $root is not a directory"
    fi
    chmod u+rwx -- "$root"  # an image may ship read-only directories
    # Enroot opens /.lock for writing and binds /.enroot through the host's view; the prefix is
    # ours.
    rm -rf --one-file-system -- "$root/.lock" "$root/.enroot" "$root$CONTAINER_PREFIX"
    if [ -L "$root/etc" ] || { [ -e "$root/etc" ] && [ ! -d "$root/etc" ]; }; then
        say "the image's /etc is not a directory: it is replaced by an empty one"
        rm -f -- "$root/etc"
    fi
    # shellcheck disable=SC2174 # only etc is made: the root exists
    mkdir -p -m 0755 -- "$root/etc"
    chmod u+rwx -- "$root/etc"
    image_path=$DEFAULT_IMAGE_PATH
    if [ -f "$root/etc/environment" ] && [ ! -L "$root/etc/environment" ]; then
        found=""
        while IFS= read -r line || [ -n "$line" ]; do
            line=${line#export }
            case $line in
                PATH=*) found=${line#PATH=} ;;
            esac
        done < <(head -c 65536 -- "$root/etc/environment")
        found=${found#[\"\']}
        found=${found%[\"\']}
        if ((${#found} <= 4096)) && [[ $found =~ ^/[A-Za-z0-9._+@/-]*(:/[A-Za-z0-9._+@/-]*)*$ ]]
        then
            image_path=$found
        elif [ -n "$found" ]; then
            say "the image's PATH is not plain absolute directories: $DEFAULT_IMAGE_PATH is used"
        fi
    fi
    rm -rf --one-file-system -- "$root/etc/fstab" "$root/etc/environment"
}
