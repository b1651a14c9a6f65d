# 1b. Trust no directory that another user could change (exit 71).
directory_problem() {
    # directory_problem PATH shared|own: what lets another user change PATH, or nothing. A
    # shared directory is followed if it is a symlink (its parent is checked on its own).
    local owner mode kind
    if [ "$2" = shared ]; then
        read -r owner mode kind < <(stat -L -c '%u %f %F' -- "$1" 2>/dev/null) || :
    else
        read -r owner mode kind < <(stat -c '%u %f %F' -- "$1" 2>/dev/null) || :
    fi
    if [ -z "${kind-}" ]; then
        echo "cannot be examined"
    elif [ "$kind" != directory ]; then
        echo "is a $kind, not a directory"
    elif [ "$2" = own ] && ((owner != EUID)); then
        echo "is owned by uid $owner, not by uid $EUID"
    elif ((owner != EUID && owner != 0)); then
        echo "is owned by uid $owner, neither by uid $EUID nor by root"
    elif (((16#$mode) & 8#022)) && ! (((16#$mode) & 8#1000)); then
        echo "is writable by group or others without the sticky bit"
    fi
}
check_directory() {
    local problem
    problem=$(directory_problem "$1" "$2")
    [ -z "$problem" ] || die 71 "$1 $problem"
}
check_shared_chain() {
    # the directory PATH and every one on its way, as written and as resolved
    local path=$1 real prefix part
    real=$(realpath -e -- "$path") || die 71 "$path cannot be resolved"
    for path in "$path" "$real"; do
        check_directory / shared
        prefix=""
        while IFS= read -r -d / part; do
            [ -n "$part" ] || continue
            prefix=$prefix/$part
            check_directory "$prefix" shared
        done <<<"${path#/}/"
    done
}
