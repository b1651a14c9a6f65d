# Enroot ends every call with `-- URL`; what is neither a manifest nor a config is curl's. A
# manifest named anywhere in a call of another shape is refused, never passed through.
if (($# < 2)) || [ "${*: -2:1}" != "--" ]; then
    for arg in "$@"; do
        [[ $arg != */manifests/* ]] || refuse "curl for the manifest $arg without a closing -- URL"
    done
    exec "$real" "$@"
fi
url=${*: -1}
if [[ $url == */manifests/* ]]; then
    kind=manifest
elif [[ $url =~ ^https?://[^/?#]+/v2/[^?#]+/blobs/sha256:([0-9a-f]{64})$ ]] &&
    [ -e "$chain/configs/${BASH_REMATCH[1]}" ]; then
    kind=config digest=${BASH_REMATCH[1]}
else
    progress_blob "$url" "$@"
    exec "$real" "$@"
fi
options=("${@:1:$#-2}")
output="" format="" head=0 args=()
for ((i = 0; i < ${#options[@]}; i++)); do
    option=${options[i]}
    case $option in
    -o | -w | --stderr | --proto | --retry | --connect-timeout | --max-time | -H | -K | \
        --netrc-file | -u)
        ((i + 1 < ${#options[@]})) || refuse "curl $option without a value for $url"
        value=${options[++i]}
        # shellcheck disable=SC2015 # refuse when the option came before; the assignment cannot fail
        case $option in
        -o) [ -z "$output" ] && output=$value || refuse "curl -o twice for $url" ;;
        -w) [ -z "$format" ] && format=$value || refuse "curl -w twice for $url" ;;
        *) args+=("$option" "$value") ;;
        esac
        ;;
    -SsL | -G | -v | -f) args+=("$option") ;;
    -I) head=1 ;;
    *) refuse "curl $option for $url is not a call the job can verify" ;;
    esac
done

check_config() {
    # check_config FILE DIGEST WHO: the config's sha256 and WorkingDir (Enroot's mkdir -p of
    # "${rootfs}${WorkingDir}" runs on the host: the path must stay inside the root); its
    # architecture (what Enroot compares with the one it imports for, its first line) is kept.
    local body=$1 digest=$2 who=$3 actual workdir architecture
    actual=$(hash_file <"$body") || refuse "cannot hash the image config sha256:$digest"
    [ "$actual" = "$digest" ] || refuse "$who sha256:$digest with sha256:$actual"
    workdir=$(jq -r '(.config.WorkingDir)? // empty' <"$body" 2>/dev/null) ||
        refuse "the image config sha256:$digest is not JSON"
    if [ -n "$workdir" ] && [ "$workdir" != / ]; then
        if [[ ! $workdir =~ ^(/[^/]+)+$ || $workdir == *[[:cntrl:]]* ||
            $workdir/ == */./* || $workdir/ == */../* ]]; then
            refuse "the image config sha256:$digest names WorkingDir ${workdir:0:200}," \
                "not a normalized absolute path (Enroot would create it outside the root)"
        fi
    fi
    architecture=$(jq -r '(.architecture // .Architecture)? // empty' <"$body" 2>/dev/null) ||
        architecture=""
    architecture=${architecture%%$'\n'*}
    printf '%s\n' "${architecture:0:100}" >"$chain/checked/$digest"
}
check_cached_config() {
    # A config the layer cache holds is never downloaded again (docker::_download skips it):
    # it is checked here, as Enroot stores it (zstd), before Enroot sees the manifest.
    local digest=$1 cached=$cache/$1 body
    [ -e "$cached" ] || [ -L "$cached" ] || return 0
    # shellcheck disable=SC2015 # refuse when either fails
    [ -f "$cached" ] && [ ! -L "$cached" ] ||
        refuse "the layer cache's image config $cached is not a regular file"
    body=$(mktemp "$chain/tmp/config.XXXXXX")
    zstd -q -d -c -- "$cached" >"$body" 2>/dev/null ||
        refuse "the layer cache's image config sha256:$digest cannot be decompressed"
    check_config "$body" "$digest" "the layer cache holds the image config"
}

keep_cached() {
    # keep_cached MANIFEST CONFIG...: its layers and configs that the layer cache holds are
    # marked used now, before Enroot looks for them there, so that a `gc` meanwhile (by age, or
    # oldest first by size) does not take them between Enroot finding them and reading them
    local digest blob
    while IFS=$'\t' read -r digest _; do
        [[ $digest =~ ^[0-9a-f]{64}$ ]] || continue
        blob=$cache/$digest
        if [ -f "$blob" ] && [ ! -L "$blob" ]; then
            touch -c -a -- "$blob" 2>/dev/null || :
        fi
    done < <(manifest_layers "$1"; shift; printf '%s\n' "$@")
}

if [ "$kind" = config ]; then
    # docker::_download_extract: the blob to stdout, checked, then Enroot's mkdir -p of
    # "${rootfs}${WorkingDir}" on the host: the path must stay inside the root.
    # shellcheck disable=SC2015 # refuse when either fails: an -o, a -w or an -I is no download
    [ -z "$output$format" ] && ((!head)) || refuse "curl for the image config $url: not a download"
    body=$(mktemp "$chain/tmp/config.XXXXXX")
    status=0
    "$real" "${args[@]}" -- "$url" >"$body" || status=$?
    ((status == 0)) || exit "$status"
    check_config "$body" "$digest" "the registry answered the image config"
    exec cat -- "$body"
fi

# A manifest: the -I probe reads headers only; a GET must be by digest, the pin or one that a
# verified index names, and is handed over only when its bytes hash to that digest.
((!head)) || exec "$real" "$@"
[[ $url =~ ^https?://[^/?#]+/v2/[^?#]+/manifests/sha256:([0-9a-f]{64})$ ]] ||
    refuse "a manifest asked for other than by its sha256 digest: $url"
digest=${BASH_REMATCH[1]}
[ "$digest" = "$pin" ] || [ -e "$chain/named/$digest" ] ||
    refuse "manifest sha256:$digest is neither the pinned digest nor named by its index"
if [ "$digest" != "$pin" ] && ! grep -qxF -- "$arch" "$chain/named/$digest"; then
    named=$(sort -u -- "$chain/named/$digest" | head -c 200 | tr '\n' ' ' | tr -d '[:cntrl:]')
    refuse "manifest sha256:$digest is named by its index for ${named% }, not for $arch," \
        "the architecture imported"
fi
# shellcheck disable=SC2015 # refuse when either fails: no -o FILE, or another -w
[ -n "$output" ] && [ "$format" = '%{http_code}' ] ||
    refuse "curl for the manifest $url: not -o FILE -w '%{http_code}'"
body=$(mktemp "$chain/tmp/manifest.XXXXXX")
status=0
code=$("$real" -o "$body" -w '%{http_code}' "${args[@]}" -- "$url") || status=$?
if ((status == 0)) && [[ $code =~ ^2[0-9][0-9]$ ]]; then
    actual=$(hash_file <"$body") || refuse "cannot hash the manifest sha256:$digest"
    [ "$actual" = "$digest" ] ||
        refuse "the registry answered manifest sha256:$digest with a manifest of sha256:$actual"
    mv -f -- "$body" "$chain/manifests/$digest"
    progress_layers "$chain/manifests/$digest"
    # What Enroot reads from it: the digests an index names (each with the architectures it is
    # named for), the config digest of a manifest (the first line of its own jq program, as 3.x
    # and as 4.x write it, and every config line).
    index='(.manifests[]? | [(.digest | strings), ((.platform.architecture? | strings) // "")]
        | @tsv)? // empty'
    while IFS=$'\t' read -r named platform; do
        [[ $named =~ ^sha256:([0-9a-f]{64})$ ]] &&
            printf '%s\n' "${platform:0:100}" >>"$chain/named/${BASH_REMATCH[1]}"
    done < <(jq -r "$index" <"$chain/manifests/$digest" 2>/dev/null)
    config='(.config.digest | ltrimstr("sha256:"))? // empty'
    layers='([.layers[].digest | ltrimstr("sha256:")] | reverse | @tsv)?'
    media='(.layers[0].mediaType)? // empty'
    configs=()
    while IFS= read -r line; do
        [[ $line =~ ^[0-9a-f]{64}$ ]] || continue
        printf '%s\n' "$digest" >"$chain/configs/$line"
        configs+=("$line")
    done < <(
        for program in "$config" "$config, $layers" "$config, $media, $layers"; do
            jq -r "$program" <"$chain/manifests/$digest" 2>/dev/null | head -n 1
        done
        jq -r "$config" <"$chain/manifests/$digest" 2>/dev/null
    )
    if [ -n "$cache" ]; then
        for line in ${configs[@]+"${configs[@]}"}; do
            check_cached_config "$line"
        done
        keep_cached "$chain/manifests/$digest" ${configs[@]+"${configs[@]}"}
    fi
    cat -- "$chain/manifests/$digest" >"$output"
fi
# Any other answer passes its code and never its body: an unverified error body must not reach
# Enroot's jq (a 404 carrying an index would choose the next manifest).
printf '%s' "$code"
exit "$status"
