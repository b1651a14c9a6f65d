# 5. Enroot's version on this node.
progress enroot-version
version_output=$(enroot version 2>/dev/null) ||
    die 78 "enroot version failed: is Enroot installed in $JOB_PATH?"
version_output=${version_output%$'\n'}
# At most 9 digits a part, so no arithmetic overflows; the parts are compared one by one.
[[ $version_output =~ ^([0-9]{1,9})\.([0-9]{1,9})\.([0-9]{1,9})([-+][0-9A-Za-z.+-]*)?$ ]] ||
    die 78 "cannot parse the Enroot version '$version_output'"
found_major=$((10#${BASH_REMATCH[1]}))
found_minor=$((10#${BASH_REMATCH[2]}))
found_patch=$((10#${BASH_REMATCH[3]}))
enroot_at_least() {
    # enroot_at_least X.Y.Z: whether the Enroot found is X.Y.Z or newer (call it as a condition)
    local major minor patch
    IFS=. read -r major minor patch <<<"$1"
    if ((found_major != major)); then
        ((found_major > major))
    elif ((found_minor != minor)); then
        ((found_minor > minor))
    else
        ((found_patch >= patch))
    fi
}
enroot_at_least "$MIN_ENROOT" ||
    die 78 "Enroot $version_output found; $OPERATION needs Enroot $MIN_ENROOT or newer"
if [ -z "${ENROOT_SQUASH_OPTIONS+set}" ]; then
    squash="-comp lzo -noD"
    if enroot_at_least 4.1.0; then
        squash="$squash -exit-on-error"
    fi
    export ENROOT_SQUASH_OPTIONS="$squash $SQUASH_MEMORY"
fi

