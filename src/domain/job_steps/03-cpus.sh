# 3. CPUs of the allocation (SLURM_CPUS_PER_TASK is only sbatch's request).
cpus=${SLURM_CPUS_ON_NODE-}
if [ -z "$cpus" ]; then
    cpus=${SLURM_JOB_CPUS_PER_NODE-}
    [[ $cpus =~ ^([0-9]+) ]] && cpus=${BASH_REMATCH[1]}
fi
[[ $cpus =~ ^[1-9][0-9]{0,4}$ ]] || die 64 "cannot tell the allocated CPU count (got '$cpus')"
export ENROOT_MAX_PROCESSORS=$cpus

