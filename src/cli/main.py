"""The ``slurm-image`` command line (docs/cli.md): ``main`` parses (``cli.parser``), runs the
command, which calls what the composition root handed it (``cli.services``: the verbs of
``application.lifecycles_port``, this machine's or a gateway's) and prints, and turns every failure
into one line on stderr and an exit code. At module level the command line imports only the standard
library and the domain's stdlib-only modules: everything else (pydantic models, the container, the
use cases, the adapters, rich) is imported inside the commands that need it, so ``--help`` loads
none of it (tests/cli/test_lazy_imports.py)."""

from __future__ import annotations

import logging
import sys
from typing import NoReturn

from slurm_image.cli import arguments, parser
from slurm_image.cli.arguments import PROG
from slurm_image.cli.command_failure import CommandFailed
from slurm_image.wire.exit_codes import EXIT_INTERNAL

log = logging.getLogger("slurm_image")


class _LifecycleField(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "lifecycle_id"):
            record.lifecycle_id = "-"
        return True


def _configure_logging(verbose: bool) -> None:
    """``--verbose``: every step, with its lifecycle id, on stderr; else warnings only."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_LifecycleField())
    handler.setFormatter(logging.Formatter(f"{PROG}: [%(lifecycle_id)s] %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO if verbose else logging.WARNING)
    log.propagate = False


def _fail(code: int, message: str) -> NoReturn:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every failure is one line on stderr and a documented exit code."""
    root = parser.build()
    namespace = root.parse_args(argv)
    options = arguments.options_of(namespace)
    _configure_logging(options.verbose)
    run: parser.Command | None = getattr(namespace, "run", None)
    if run is None:
        root.print_help()
        raise SystemExit(0)
    try:
        run(options, namespace)
    except CommandFailed as failure:
        from slurm_image.wire.errors import describe, exit_code_for

        hint = f" ({failure.hint})" if failure.hint else ""
        _fail(exit_code_for(failure.error), describe(failure.error) + hint)
    except KeyboardInterrupt:
        _fail(130, "interrupted")
    except Exception as error:
        from slurm_image.wire.errors import describe

        _fail(EXIT_INTERNAL, f"internal error: {describe(error)} (please report this)")


if __name__ == "__main__":
    main()
