# 1. An attempt directory is used once: a requeued run would find it dirty.
restart_count=${SLURM_RESTART_COUNT:-0}
[[ $restart_count =~ ^[0-9]+$ ]] || die 75 "SLURM_RESTART_COUNT is not a number"
# compared as text: 10#18446744073709551616 wraps to 0 in bash arithmetic
[[ $restart_count =~ ^0+$ ]] || die 75 "the job was requeued (SLURM_RESTART_COUNT=$restart_count)"
