die() {
    local code=$1
    shift
    printf 'slurm-image: error: %s (exit %s)\n' "$*" "$code" >&2
    exit "$code"
}
say() {
    printf 'slurm-image: %s\n' "$*" >&2
}

