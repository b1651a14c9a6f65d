"""The command's exit codes (docs/cli.md, "Exit codes"), in a module of their own so that the CLI
can name them without loading the error types (``entrypoints.errors`` maps those to these codes)."""

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_INVALID = 2
EXIT_SCHEDULER = 3
EXIT_JOB_FAILED = 4
EXIT_VERIFICATION = 5
EXIT_CONFLICT = 6
EXIT_WAIT_TIMEOUT = 7
