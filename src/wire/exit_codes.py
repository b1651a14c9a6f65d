"""The command's exit codes (docs/cli.md, "Exit codes"), in a module of their own so that the CLI
can name them without loading the error types (``wire.errors`` maps those to these codes)."""

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_INVALID = 2
EXIT_SCHEDULER = 3
EXIT_JOB_FAILED = 4
EXIT_VERIFICATION = 5
EXIT_CONFLICT = 6
EXIT_WAIT_TIMEOUT = 7
EXIT_REGISTRY_ANSWER = 8
"""The registry's answer was refused: a ``Docker-Content-Digest`` that disagrees with the bytes,
more than 4 MiB, or no manifest or index an import reads (``resolve``, ``import --resolve``)."""
EXIT_OUTDATED = 9
"""``outdated``: a published tag moved to another image or is gone."""
EXIT_UNSIGNED = 10
"""The site policy requires a signature and the pinned digest has none it accepts (unsigned,
signed by another key, a signature over another digest, malformed signature material);
nothing was staged."""
EXIT_FORBIDDEN = 11
"""The gateway's rules do not let the requester do this (docs/gateway.md, "Who may do what"):
another's alias, an admin's verb, a group the requester is not in."""
EXIT_NOT_AUTHENTICATED = 12
"""The gateway could not tell who is asking: no credential, or one that is expired, replayed or
made with another key."""
EXIT_BUSY = 13
"""The gateway's limits are reached (imports in flight, requests per minute): ask again later."""
