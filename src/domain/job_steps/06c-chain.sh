# 6c. The chain from the pinned digest to the bytes squashed. Enroot hashes no
# manifest: it checks each blob against the manifest the registry sent. Its curl during the
# import is the verifying curl below (README, Threat model); the job reads its verdict whatever
# the import did.
readonly CHAIN=$scratch/chain
# shellcheck disable=SC2015 # die when either fails: no curl, or none by an absolute path
real_curl=$(command -v curl) && [[ $real_curl == /* ]] ||
    die 78 "curl is missing in $JOB_PATH (Enroot's import needs it)"
command -v jq >/dev/null || die 78 "jq is missing in $JOB_PATH (Enroot's import needs it)"
mkdir -m 0700 -- "$CHAIN" "$CHAIN/bin" "$CHAIN/tmp" "$CHAIN/manifests" "$CHAIN/named" \
    "$CHAIN/configs" "$CHAIN/checked"
