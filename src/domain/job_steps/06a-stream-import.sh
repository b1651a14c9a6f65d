# 6a. The stream importer (image_build.importer = "stream"): the pinned manifest (and, from an
# index, the architecture's), the image config and the layers are fetched as Enroot fetches
# them, through the verifying curl of step 6c, with the staged credentials; every layer is
# checked against its digest, then merged into tar2sqfs (step stream-squash). The layer cache
# is not used: the blobs are this job's, in its scratch, removed with it.
source_uri=$SOURCE_URI
readonly BLOBS=$scratch/blobs STREAMER=$scratch/merge_layers.py
stream_options=()
stream_auth=()
stream_base=""
stream_curl() {
    # stream_curl ARG...: one registry call through the verifying curl, in Enroot's shape
    SLURM_IMAGE_CHAIN=$CHAIN SLURM_IMAGE_CURL=$real_curl SLURM_IMAGE_PIN=$PINNED_HEX \
        SLURM_IMAGE_ARCH=$architecture_oci SLURM_IMAGE_CACHE="" SLURM_IMAGE_PROGRESS=$PROGRESS \
        "$CHAIN/bin/curl" "${stream_options[@]}" "$@"
}
stream_failed() {
    # stream_failed STATUS WHAT: a refusal of the verifying curl first (79, 82), else curl's
    local status=$1
    shift
    remove_credentials
    check_chain "$status"
    if [ -n "$CREDENTIALS_HOST" ]; then
        die "$status" "fetching $* from $REGISTRY_HOST failed with status $status, with the" \
            "credentials staged for $CREDENTIALS_HOST"
    fi
    die "$status" "fetching $* from $REGISTRY_HOST failed with status $status, without" \
        "credentials (no entry for $REGISTRY_HOST in the profile's enroot.credentials_file;" \
        "a private registry needs one)"
}
stream_authenticate() {
    # The permission probe, as Enroot's: a 401's challenge names Basic (the staged netrc on
    # every call) or Bearer (a token from its realm, asked with the staged netrc if any).
    local headers=$scratch/probe-headers challenge realm service scope status=0 token
    local netrc=()
    [ -z "$CREDENTIALS_HOST" ] || netrc=(--netrc-file "$staged_credentials")
    "$real_curl" "${stream_options[@]}" -I -o /dev/null -D "$headers" \
        -- "$stream_base/manifests/sha256:$PINNED_HEX" || status=$?
    ((status == 0)) || stream_failed "$status" "the manifest's headers"
    challenge=$(grep -i '^www-authenticate:' -- "$headers" | tail -n 1 | tr -d '\r') || return 0
    challenge=${challenge#*:}
    challenge=${challenge# }
    if [[ $challenge =~ ^[Bb]asic ]]; then
        stream_auth=("${netrc[@]}")
        return 0
    fi
    [[ $challenge =~ realm=\"([^\"]*)\" ]] || return 0
    realm=${BASH_REMATCH[1]}
    service="" scope="repository:$REPOSITORY:pull"
    [[ ! $challenge =~ service=\"([^\"]*)\" ]] || service=${BASH_REMATCH[1]}
    [[ ! $challenge =~ scope=\"([^\"]*)\" ]] || scope=${BASH_REMATCH[1]}
    [[ $realm =~ ^https?:// ]] || stream_failed 1 "a token (the challenge names no http(s) realm)"
    status=0
    token=$("$real_curl" "${stream_options[@]}" -f -G "${netrc[@]}" \
        --data-urlencode "service=$service" --data-urlencode "scope=$scope" -- "$realm" |
        jq -r '(.token // .access_token)? // empty') || status=$?
    ((status == 0)) || stream_failed "$status" "a token"
    [[ $token =~ ^[A-Za-z0-9_.~+/=-]{1,8192}$ ]] ||
        stream_failed 1 "a token (the token service answered none that can be sent)"
    printf 'header = "Authorization: Bearer %s"\n' "$token" >"$scratch/stream-token"
    stream_auth=(-K "$scratch/stream-token")
}
stream_manifest() {
    # stream_manifest HEX: the manifest (or index) of that digest, verified, into $BLOBS/HEX
    local code status=0 accept
    accept="application/vnd.oci.image.index.v1+json,"
    accept+="application/vnd.docker.distribution.manifest.list.v2+json,"
    accept+="application/vnd.oci.image.manifest.v1+json,"
    accept+="application/vnd.docker.distribution.manifest.v2+json"
    code=$(stream_curl -o "$BLOBS/$1" -w '%{http_code}' -H "Accept: $accept" \
        "${stream_auth[@]}" -- "$stream_base/manifests/sha256:$1") || status=$?
    ((status != 0)) || [[ $code =~ ^2[0-9][0-9]$ ]] || status=22
    ((status == 0)) || stream_failed "$status" "manifest sha256:$1"
}
stream_blob() {
    # stream_blob HEX: a blob to $BLOBS/HEX (the config's check is the verifying curl's)
    local status=0
    [ ! -e "$BLOBS/$1" ] || return 0
    stream_curl -f "${stream_auth[@]}" -- "$stream_base/blobs/sha256:$1" >"$BLOBS/$1" ||
        status=$?
    ((status == 0)) || stream_failed "$status" "blob sha256:$1"
    verify_blob "$BLOBS/$1" "$1"
}
run_import() {
    local manifest=$PINNED_HEX config layers=() digest allow_http
    stream_tools
    allow_http=${ENROOT_ALLOW_HTTP-}
    if [[ ${allow_http,,} =~ ^(y|yes|true|1|on)$ ]]; then
        stream_options=(--proto "=http,https")
        stream_base=http://$REGISTRY_HOST/v2/$REPOSITORY
    else
        stream_options=(--proto "=https")
        stream_base=https://$REGISTRY_HOST/v2/$REPOSITORY
    fi
    stream_options+=(--retry "${ENROOT_TRANSFER_RETRIES:-0}" --connect-timeout
        "${ENROOT_CONNECT_TIMEOUT:-30}" --max-time "${ENROOT_TRANSFER_TIMEOUT:-0}" -SsL)
    mkdir -m 0700 -- "$BLOBS"
    write_streamer || die 73 "cannot create $STREAMER"
    stream_authenticate
    stream_manifest "$manifest"
    if jq -e '.manifests? | type == "array"' <"$BLOBS/$manifest" >/dev/null 2>&1; then
        manifest=$(jq -r --arg arch "$architecture_oci" '[.manifests[] | select(
            .platform.architecture? == $arch) | .digest | strings][0] // empty' \
            <"$BLOBS/$manifest" 2>/dev/null) || manifest=""
        if [[ ! $manifest =~ ^sha256:([0-9a-f]{64})$ ]]; then
            index_without_architecture
            die 82 "the index sha256:$PINNED_HEX names no manifest for $architecture"
        fi
        manifest=${BASH_REMATCH[1]}
        stream_manifest "$manifest"
    fi
    config=$(jq -r '.config.digest | strings' <"$BLOBS/$manifest" 2>/dev/null) || config=""
    [[ $config =~ ^sha256:([0-9a-f]{64})$ ]] ||
        die 79 "the manifest sha256:$manifest names no image config by its sha256 digest"
    config=${BASH_REMATCH[1]}
    while IFS= read -r digest; do
        [[ $digest =~ ^sha256:([0-9a-f]{64})$ ]] ||
            die 79 "the manifest sha256:$manifest names a layer by other than its sha256 digest"
        layers+=("$BLOBS/${BASH_REMATCH[1]}")
    done < <(jq -r '.layers[].digest' <"$BLOBS/$manifest" 2>/dev/null)
    ((${#layers[@]})) || die 79 "the manifest sha256:$manifest names no layers"
    stream_blob "$config"
    for digest in "${layers[@]}"; do
        stream_blob "${digest##*/}"
    done
    remove_credentials
    rm -f -- "$scratch/stream-token"
    check_chain 0
    say "merging ${#layers[@]} layers into $PARTIAL with tar2sqfs"
    # one pass: nothing is extracted before the squash
    progress squash
    stream_squash "$PARTIAL" "$BLOBS/$config" "$source_uri" "${layers[@]}"
    rm -rf -- "$BLOBS" "$STREAMER"
}
