# 4b. The layer cache kept between this user's imports (README, "The layer cache"): Enroot's
# blobs by digest, each verified when it was downloaded. Whoever could add an entry to it could
# plant a layer under a digest, so the directory must be this user's own and closed to group
# and others, and every directory on its way owned by this user or root (sticky where others
# may write), symlinks included: a link of another user's can be turned elsewhere (exit 84).
cache_check() {
    # cache_check PATH shared|own: die 84 naming PATH and what lets another user change it
    local problem owner
    if [ -L "$1" ] && [ "$2" = shared ]; then
        owner=$(stat -c %u -- "$1" 2>/dev/null) || owner=""
        if [ "$owner" != "$EUID" ] && [ "$owner" != 0 ]; then
            die 84 "the layer cache $LAYER_CACHE is refused: $1 is a symlink owned by uid" \
                "${owner:-?}, neither by uid $EUID nor by root"
        fi
    fi
    problem=$(directory_problem "$1" "$2")
    if [ -z "$problem" ] && [ "$2" = own ] &&
        (((16#$(stat -c %f -- "$1")) & 8#022)); then
        problem="is writable by group or others, who could plant a layer in it"
    fi
    [ -z "$problem" ] || die 84 "the layer cache $LAYER_CACHE is refused: $1 $problem"
}
cache_chain() {
    # every directory on the way to PATH, as written and as resolved, then PATH itself
    local path=$1 prefix part
    cache_check / shared
    prefix=""
    while IFS= read -r -d / part; do
        [ -n "$part" ] || continue
        prefix=$prefix/$part
        [ "$prefix" != "$path" ] || break
        if [ ! -e "$prefix" ] && [ ! -L "$prefix" ]; then
            # a peer import may create it at the same moment: checked below either way
            mkdir -m 0700 -- "$prefix" 2>/dev/null || [ -d "$prefix" ] ||
                die 84 "the layer cache $LAYER_CACHE is refused: cannot create $prefix"
        fi
        cache_check "$prefix" shared
    done <<<"${path#/}/"
    if [ ! -e "$path" ] && [ ! -L "$path" ]; then
        mkdir -m 0700 -- "$path" 2>/dev/null || [ -d "$path" ] ||
            die 84 "the layer cache $LAYER_CACHE is refused: cannot create it"
    fi
    cache_check "$path" own
}
readonly IMPORT_PID=$scratch/import.pid
remove_own_tokens() {
    # Enroot's tokens of the import this job ran (.tokens.<uid>/<registry>.<its pid>), also
    # when it was killed before its own trap could remove them; a peer import's stay
    local pid
    pid=$(cat -- "$IMPORT_PID" 2>/dev/null) || return 0
    [[ $pid =~ ^[1-9][0-9]{0,9}$ ]] || return 0
    rm -f -- "$ENROOT_CACHE_PATH/.tokens.$EUID/"*".$pid"
}
if [ -n "$LAYER_CACHE" ]; then
    cache_chain "$LAYER_CACHE"
    layer_cache=$(realpath -e -- "$LAYER_CACHE") ||
        die 84 "the layer cache $LAYER_CACHE is refused: it cannot be resolved"
    [ "$layer_cache" = "$LAYER_CACHE" ] || cache_chain "$layer_cache"
    export ENROOT_CACHE_PATH=$layer_cache
    # A job that died hard (SIGKILL, a node failure) ran no trap: tokens that outlived their
    # job's time limit belong to no running import of this profile.
    if [ -d "$layer_cache/.tokens.$EUID" ] && [ ! -L "$layer_cache/.tokens.$EUID" ]; then
        find "$layer_cache/.tokens.$EUID" -mindepth 1 -maxdepth 1 -type f \
            -mmin "+$TOKEN_MAX_AGE_MINUTES" -delete 2>/dev/null || :
    fi
    say "layer cache: $layer_cache"
else
    say "layer cache: off (this job's own, in its scratch)"
fi
