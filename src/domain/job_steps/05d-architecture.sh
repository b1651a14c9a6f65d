# 5d. The architecture the job works for: the plan's, else for an import this node's (an inspect
# without one takes the image as it is). The node must run its executables, the image's python3
# among them, before anything is imported; the job records it (write_architecture_record).
architecture=$ARCHITECTURE
if [ -z "$architecture" ] && [ "$OPERATION" = import_oci ]; then
    architecture=$node_architecture
fi
architecture_oci=""
if [ -n "$architecture" ]; then
    read -r architecture_oci _ < <(architecture_fields "$architecture") || :
    [ -n "$architecture_oci" ] || die 81 "this node's architecture $architecture is none the" \
        "job imports for (${ARCHITECTURES[*]%%:*}): build in a partition of one of those"
    problem=$(architecture_problem "$architecture")
    [ -z "$problem" ] || die 81 "this $node_architecture node cannot run $architecture" \
        "executables: ${problem:0:600}. The site can register qemu-user-static for" \
        "$architecture in binfmt_misc with flag F (Debian: apt-get install qemu-user-static" \
        "binfmt-support), or build in a partition of $architecture nodes"
    if [ -e "$ARCHITECTURE_RECORD" ] || [ -L "$ARCHITECTURE_RECORD" ]; then
        die 73 "$ARCHITECTURE_RECORD already exists"
    fi
    say "architecture $architecture (OCI $architecture_oci) on a $node_architecture node"
fi
write_architecture_record() {
    (set -C && printf '%s\n' "$architecture" >"$ARCHITECTURE_RECORD") ||
        die 73 "cannot create $ARCHITECTURE_RECORD"
}
if [ -n "$architecture" ] && [ "$OPERATION" != import_oci ]; then
    write_architecture_record
fi
