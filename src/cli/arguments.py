"""The command line's grammar machinery (argparse, standard library only): one-line usage
errors with exit 2 (docs/cli.md), typed option values, the global options. The commands themselves
are declared in ``cli.parser``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from slurm_image.wire.exit_codes import EXIT_INVALID

PROG = "slurm-image"


@dataclass
class Options:
    profile: str | None
    cluster: str | None
    json: bool
    quiet: bool
    verbose: bool
    gateway: str | None = None
    """``--gateway URL`` (``local``: this machine's store, whatever else says otherwise)."""


class Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr naming the argument and the rule, and exit 2."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(**kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{PROG}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(EXIT_INVALID)


def seconds(minimum: float) -> Callable[[str], float]:
    """An option value in seconds, at least ``minimum``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not value >= minimum:  # also refuses nan
            raise argparse.ArgumentTypeError(f"{text!r}: must be at least {minimum:g} seconds")
        if value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number of seconds")
        return value

    return parse


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("slurm-image-lifecycle")
        except PackageNotFoundError:
            found = "unknown"
        sys.stdout.write(f"{PROG} {found}\n")
        raise SystemExit(0)


def add_json(parser: argparse.ArgumentParser) -> None:
    """``--json`` after the command (its own destination: a subcommand's default would
    otherwise overwrite the global option's value)."""
    parser.add_argument(
        "--json", dest="json_after", action="store_true", help="One JSON object on stdout."
    )


def root_parser(description: str) -> tuple[Parser, Any]:
    """The program's parser with the global options, and its subcommand registry."""
    parser = Parser(prog=PROG, description=description)
    parser.add_argument("--profile", metavar="PATH", help="Site profile (TOML).")
    parser.add_argument("--cluster", metavar="NAME", help="Cluster of a catalog.")
    parser.add_argument(
        "--gateway",
        metavar="URL",
        help="Ask the site's gateway (unix:PATH or https://HOST:PORT) instead of a store of"
        " your own; default $SLURM_IMAGE_GATEWAY, else the profile's [gateway] url; 'local':"
        " this machine's store.",
    )
    parser.add_argument("--json", action="store_true", help="One JSON object on stdout.")
    parser.add_argument(
        "--quiet", action="store_true", help="Print only what scripts need (ids, paths)."
    )
    parser.add_argument(
        "--verbose", action="store_true", help="Log every step (ids, job ids, digests) to stderr."
    )
    parser.add_argument("--version", action=_Version, help="Print the version and exit.")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", dest="command")
    return parser, commands


def options_of(namespace: argparse.Namespace) -> Options:
    return Options(
        profile=namespace.profile,
        cluster=namespace.cluster,
        json=namespace.json or getattr(namespace, "json_after", False),
        quiet=namespace.quiet,
        verbose=namespace.verbose,
        gateway=namespace.gateway,
    )
