# 0. Re-execute once, in a clean environment. Slurm 22.05 starts the job in the submitter's
# login environment even with --export=NIL: SLURM_JWT and other tokens, BASH_ENV, exported
# functions, and SLURM_IMAGE_* settings that share Slurm's prefix. bash -p has read neither
# BASH_ENV nor the functions, so the job runs itself again under env -i with only PATH (the
# profile's image_build.job_path), LC_ALL=C, the node's TMPDIR as NODE_TMPDIR, and the Slurm
# variables it reads: SLURM_JOB_ID names the container and scratch, SLURM_RESTART_COUNT is the
# requeue guard, SLURM_CPUS_ON_NODE and SLURM_JOB_CPUS_PER_NODE are the allocation. The marker
# is an argument, which no environment can forge.
IFS=$' \t\n'
if [ "${1-}" != "--clean-environment" ]; then
    keep=()
    for variable in @SLURM_VARIABLES@; do
        [ -z "${!variable+set}" ] || keep+=("$variable=${!variable}")
    done
    exec /usr/bin/env -i PATH=@JOB_PATH@ LC_ALL=C "NODE_TMPDIR=${TMPDIR-}" \
        "${keep[@]}" /bin/bash -p "$0" --clean-environment
fi
