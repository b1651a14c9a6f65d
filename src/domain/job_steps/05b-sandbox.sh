# 5b. The image's side of the job runs in a sandbox: a user namespace whose root is an
# unprivileged host id (the job's user; for root's job SANDBOX_ID, with no groups: never host
# root) and a PID namespace whose init is the chain that execs down to the image's rc. When it
# ends, the kernel kills every process left in it, whatever it did to its root, its leader or
# /proc; --kill-child ends it with the job. A network namespace of its own, too: the inspection
# needs no network, and the node's services (slurmctld, slurmd, slurmrestd, a registry) must be
# out of the image's reach; only a loopback of its own, down, is there (README, Threat model).
# Enroot's import runs outside it, on the node's network.
if ((EUID == 0)); then
    readonly SANDBOX_OWNER=$SANDBOX_ID
    as_sandbox=(setpriv "--reuid=$SANDBOX_ID" "--regid=$SANDBOX_ID" --clear-groups --no-new-privs)
    chmod 0711 -- "$scratch"  # its own directory in there is the sandbox's; the rest stays 0700
else
    readonly SANDBOX_OWNER=$EUID
    as_sandbox=(setpriv --no-new-privs)
fi
sandbox=(unshare --user --map-root-user --pid --fork --kill-child --mount --mount-proc --net)
sandbox_problem() {
    # what keeps this node from running the image in its sandbox, or nothing
    local answer pid network inner outer count
    # shellcheck disable=SC2016 # the sandbox's shell expands them, not this one
    answer=$(cd / && "${as_sandbox[@]}" "${sandbox[@]}" /bin/bash -pc \
        'echo "$$ $(readlink /proc/self/ns/net) $(cat /proc/self/uid_map)"
        command -v enroot || echo "no enroot"' 2>&1 9<&-)
    read -r pid network inner outer count <<<"$answer" || :
    if [ "$pid $inner $outer $count" != "1 0 $SANDBOX_OWNER 1" ]; then
        printf '%s\n' "${answer//[[:cntrl:]]/ }"
    elif [[ $network != net:* ]] || [ "$network" = "$(readlink /proc/self/ns/net)" ]; then
        printf 'the sandbox has no network namespace of its own (%s)\n' "${network//[[:cntrl:]]/ }"
    elif [[ $answer == *$'\n'"no enroot" ]]; then
        printf 'uid %s finds no enroot it can run on %s\n' "$SANDBOX_OWNER" "$JOB_PATH"
    elif ! "${as_sandbox[@]}" test -x "$scratch" 9<&-; then
        printf 'uid %s cannot walk to the scratch %s\n' "$SANDBOX_OWNER" "$scratch"
    fi
}
