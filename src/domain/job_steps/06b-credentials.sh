# 6b. Registry credentials: only the staged entry for this registry,
# used by this import alone and removed as soon as it ends (the image runs later, and can mount
# host paths).
staged_credentials=$JOB_ENROOT_CONFIG/.credentials
remove_credentials() {
    rm -f -- "$staged_credentials"
    remove_own_tokens
    if [ -z "$LAYER_CACHE" ]; then
        rm -rf -- "$ENROOT_CACHE_PATH"/.tokens.*
    fi
}
if [ -n "$CREDENTIALS_HOST" ]; then
    if [ -L "$staged_credentials" ] || [ ! -f "$staged_credentials" ]; then
        die 70 "the credentials staged for $CREDENTIALS_HOST are not a regular file"
    fi
    say "importing with the credentials staged for $CREDENTIALS_HOST"
elif [ -e "$staged_credentials" ] || [ -L "$staged_credentials" ]; then
    die 70 "$staged_credentials exists, but the plan stages no credentials"
else
    say "no credentials for $REGISTRY_HOST: importing anonymously"
fi
# Enroot finds the Basic credentials in curl's verbose output with exact case; over HTTP/2 curl
# prints the header in lower case and the credentials are dropped silently (docs/enroot.md).
(set -C && printf '%s\n' --http1.1 >"$JOB_HOME/.curlrc") ||
    die 70 "cannot create $JOB_HOME/.curlrc"
