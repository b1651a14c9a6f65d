#!/bin/bash -p
# The verifying curl of a slurm-image import job. Enroot gets a manifest only when its sha256
# is the digest it asked for (the pin, or one a verified index names for the architecture
# imported), and the image config only when its sha256 is the verified manifest's and its
# WorkingDir is a normalized absolute path; anything else is written to the verdict and fails
# like curl; a config Enroot's cache already holds is checked there. It keeps the config's
# architecture for the job. The rest is curl's own.
set -euo pipefail
umask 077
IFS=$' \t\n'
chain=${SLURM_IMAGE_CHAIN:?} real=${SLURM_IMAGE_CURL:?} pin=${SLURM_IMAGE_PIN:?}
arch=${SLURM_IMAGE_ARCH:?} cache=${SLURM_IMAGE_CACHE-}
PROGRESS=${SLURM_IMAGE_PROGRESS-}
refuse() {
    printf '%s\n' "$*" >>"$chain/verdict"
    printf 'slurm-image: refused: %s\n' "$*" >&2
    exit 1
}
