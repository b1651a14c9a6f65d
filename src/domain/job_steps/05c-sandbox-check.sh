# 5c. Without a sandbox the image does not run.
problem=$(sandbox_problem)
[ -z "$problem" ] || die 80 "this node cannot run the image in a sandbox (it needs util-linux" \
    "2.32 or newer for setpriv and unshare --kill-child --mount-proc, user and network" \
    "namespaces, and a scratch that uid $SANDBOX_OWNER can walk to): ${problem:0:300}"

