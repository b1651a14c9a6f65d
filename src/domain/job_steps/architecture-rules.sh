# Which architectures this node runs (the job's step 5d and the doctor): its own, and another
# through a binfmt_misc handler that is enabled, has flag F (without it the kernel looks the
# interpreter up inside the image's root, where it is not) and whose magic matches an ELF64
# little-endian executable of that architecture. ARCHITECTURES holds UNAME:OCI:E_MACHINE.
node_architecture=$(uname -m 2>/dev/null) || node_architecture=unknown
architecture_fields() {
    # architecture_fields NAME: "OCI E_MACHINE" of the uname NAME; nothing for another name
    local entry
    for entry in "${ARCHITECTURES[@]}"; do
        if [ "${entry%%:*}" = "$1" ]; then
            entry=${entry#*:}
            printf '%s %s\n' "${entry%%:*}" "${entry#*:}"
            return 0
        fi
    done
}
elf_header() {
    # elf_header E_TYPE E_MACHINE: the first 20 bytes of such an ELF64 LSB file, in hex
    printf '7f454c46020101000000000000000000%02x00%02x%02x' "$1" $(($2 & 255)) $(($2 >> 8))
}
binfmt_matches() {
    # binfmt_matches OFFSET MAGIC MASK HEADER: whether the kernel would pick the handler for a
    # file that starts with HEADER (its test: (byte ^ magic) & mask == 0 for every magic byte)
    local offset=$1 magic=$2 mask=$3 header=$4 i byte
    [[ $offset =~ ^[0-9]{1,2}$ && $magic =~ ^([0-9a-f]{2})+$ && $mask =~ ^([0-9a-f]{2})*$ ]] ||
        return 1
    ((10#$offset + ${#magic} / 2 <= ${#header} / 2)) || return 1
    [ -n "$mask" ] || mask=${magic//?/f}
    ((${#mask} == ${#magic})) || return 1
    for ((i = 0; i < ${#magic}; i += 2)); do
        byte=${header:2 * 10#$offset + i:2}
        (((16#$byte ^ 16#${magic:i:2}) & 16#${mask:i:2})) && return 1
    done
    return 0
}
architecture_problem() {
    # architecture_problem NAME: what keeps this node from running NAME's executables, or nothing
    local name=$1 oci machine entry status flags offset magic mask line handler found=""
    [ "$name" != "$node_architecture" ] || return 0
    read -r oci machine < <(architecture_fields "$name") || :
    if [ -z "${machine-}" ]; then
        printf '%s is no architecture the job knows\n' "$name"
        return 0
    fi
    if [ ! -f "$BINFMT_MISC/status" ]; then
        printf 'binfmt_misc is not mounted at %s\n' "$BINFMT_MISC"
        return 0
    fi
    status=$(head -c 64 -- "$BINFMT_MISC/status" 2>/dev/null) || status=""
    if [ "$status" != enabled ]; then
        printf 'binfmt_misc is %s (%s/status)\n' "${status:-unreadable}" "$BINFMT_MISC"
        return 0
    fi
    for entry in "$BINFMT_MISC"/*; do
        handler=${entry##*/}
        case $handler in register | status) continue ;; esac
        if [ -L "$entry" ] || [ ! -f "$entry" ]; then
            continue
        fi
        status="" flags="" offset="" magic="" mask=""
        while IFS= read -r line || [ -n "$line" ]; do
            case $line in
                enabled | disabled) status=$line ;;
                "flags: "*) flags=${line#flags: } ;;
                "offset "*) offset=${line#offset } ;;
                "magic "*) magic=${line#magic } ;;
                "mask "*) mask=${line#mask } ;;
            esac
        done < <(head -c 4096 -- "$entry" 2>/dev/null)
        # both an executable (ET_EXEC) and a position-independent one (ET_DYN), as python3 is
        if ! binfmt_matches "$offset" "$magic" "$mask" "$(elf_header 2 "$machine")" ||
            ! binfmt_matches "$offset" "$magic" "$mask" "$(elf_header 3 "$machine")"; then
            continue
        fi
        if [ "$status" != enabled ]; then
            found+="; $handler is ${status:-in an unknown state}"
        elif [[ $flags != *F* ]]; then
            found+="; $handler has no flag F (its interpreter would be looked up in the image)"
        else
            return 0
        fi
    done
    printf 'no enabled binfmt_misc handler with flag F runs %s (ELF machine %s, OCI %s) here%s\n' \
        "$name" "$machine" "$oci" "$found"
}

