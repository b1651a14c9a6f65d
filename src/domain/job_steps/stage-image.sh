#!/bin/bash -p
# The image's side of a slurm-image job on the overlay path, run as the sandbox's init (its
# user, mount and PID namespaces). It mounts the image the job hashed (fd 9: the very file,
# whatever its path leads to now) read-only with squashfuse, an overlay above it at the
# container's root, contains that root as the unpack path does, and runs `enroot start` in a PID
# namespace of its own, from which the image sees no FUSE daemon. The mounts exist only in this
# mount namespace and end with it; fd 8 hears "mounted" once both are in place.
set -euo pipefail
umask 077
IFS=$' \t\n'
overlay=${STAGE_OVERLAY:?} ROOTFS=${STAGE_ROOTFS:?} layers=${STAGE_LAYERS:?}
CONTAINER_PREFIX=${STAGE_PREFIX:?}
unset STAGE_OVERLAY STAGE_ROOTFS STAGE_LAYERS STAGE_PREFIX
