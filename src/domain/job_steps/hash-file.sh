hash_file() {
    local out
    if command -v openssl >/dev/null 2>&1; then
        out=$(openssl dgst -sha256 -r) || return 1
    else
        out=$(sha256sum) || return 1
    fi
    out=${out%% *}
    [[ $out =~ ^[0-9a-f]{64}$ ]] || return 1
    printf '%s\n' "$out"
}
