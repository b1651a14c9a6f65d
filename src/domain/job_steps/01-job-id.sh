[[ ${SLURM_JOB_ID-} =~ ^[1-9][0-9]{0,9}$ ]] || die 64 "SLURM_JOB_ID is missing or not a job id"
readonly CONTAINER_NAME="slurm-image-$SLURM_JOB_ID"

