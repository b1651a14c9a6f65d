chmod 0500 -- "$CHAIN/bin/curl"
check_chain() {
    # check_chain STATUS: any refusal fails the job (79); a good import must have been seen.
    local status=$1 checked
    if [ -s "$CHAIN/verdict" ]; then
        die 79 "the registry's answer does not match the pinned digest sha256:$PINNED_HEX," \
            "or the image config names a path outside the root: $(head -c 2000 -- \
            "$CHAIN/verdict" | tr '\n' ' ')"
    fi
    ((status == 0)) || index_without_architecture
    ((status == 0)) || return 0
    [ -f "$CHAIN/manifests/$PINNED_HEX" ] ||
        die 79 "the import verified no manifest of the pinned digest sha256:$PINNED_HEX"
    checked=$(find "$CHAIN/checked" -mindepth 1 -maxdepth 1 -printf '%f\n')
    [[ $checked =~ ^[0-9a-f]{64}$ ]] ||
        die 79 "the import verified not exactly one image config for sha256:$PINNED_HEX"
    chain_config=$checked
    chain_manifest=$(head -n 1 -- "$CHAIN/configs/$chain_config")
}
index_without_architecture() {
    # An index that names no manifest for the architecture: Enroot fetches the pin again as a
    # manifest and cannot read it. The verifying curl kept the architectures the index names.
    local named=("$CHAIN"/named/*) listed
    [ -e "${named[0]}" ] || return 0
    ! grep -qxF -- "$architecture_oci" "${named[@]}" || return 0
    listed=$(sort -u -- "${named[@]}" | tr '\n' ' ')
    die 82 "the index sha256:$PINNED_HEX names no manifest for $architecture" \
        "($architecture_oci), only for: ${listed//[[:cntrl:]]/}"
}
check_image_architecture() {
    # The config's architecture, as the verifying curl read it (Enroot itself only warns).
    local found
    found=$(head -c 200 -- "$CHAIN/checked/$chain_config" | head -n 1 | tr -d '[:cntrl:]')
    [ "$found" = "$architecture_oci" ] ||
        die 82 "the image's config sha256:$chain_config says ${found:-no architecture}," \
            "the job imported for $architecture ($architecture_oci)"
}
write_chain_record() {
    say "verified chain: pinned sha256:$PINNED_HEX, manifest sha256:$chain_manifest," \
        "config sha256:$chain_config"
    # shellcheck disable=SC2059 # the format is the plan's, the record's one form (verified_chain)
    (set -C && printf "$CHAIN_FORMAT\n" "$chain_config" "$chain_manifest" "$PINNED_HEX" \
        >"$CHAIN_RECORD") ||
        die 73 "cannot create $CHAIN_RECORD"
}
