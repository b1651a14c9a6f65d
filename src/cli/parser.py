"""The whole command line (docs/cli.md): every command, its arguments and the function that runs
it. The commands' modules import only the standard library and the domain's stdlib-only modules
at module level, so building this parser (and ``--help``) loads nothing of the models, the
container or the use cases."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from slurm_image.cli import (
    arguments,
    doctor_command,
    history_command,
    metrics_command,
    serve_command,
)
from slurm_image.cli.arguments import Options
from slurm_image.cli.catalog_commands import (
    catalog_command,
    cleanup_command,
    gc_command,
    list_command,
    path_command,
    publish_command,
    show_command,
    unregister_command,
)
from slurm_image.cli.lifecycle_commands import (
    import_command,
    inspect_command,
    submit_command,
)
from slurm_image.cli.observe_commands import (
    cancel_command,
    logs_command,
    status_command,
    wait_command,
)
from slurm_image.cli.tag_commands import (
    RESOLVE_TIMEOUT_S,
    outdated_command,
    resolve_command,
)
from slurm_image.domain.roles import ROLES

if TYPE_CHECKING:
    from argparse import Namespace

Command = Callable[[Options, "Namespace"], None]


def _command(commands: Any, name: str, run: Command, help_text: str) -> arguments.Parser:
    parser: arguments.Parser = commands.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(run=run)
    return parser


def _lifecycle_options(parser: arguments.Parser) -> None:
    parser.add_argument("--name", metavar="NAME", required=True, help="Alias to publish under.")
    parser.add_argument("--role", choices=ROLES, required=True, help="What the image is for.")
    parser.add_argument("--dry-run", action="store_true", help="Print plan and script only.")
    parser.add_argument(
        "--no-submit", action="store_true", help="Stage only; submit later with `submit ID`."
    )
    _arch(
        parser,
        "Architecture x86_64, aarch64 or ppc64le: import builds for it (default: the"
        " profile's, else the node's); inspect requires the image to be it.",
    )
    parser.add_argument(
        "--wait", action="store_true", help="Wait for the job and publish its result."
    )
    _timeout(parser)
    parser.add_argument(
        "--replace", action="store_true", help="Rebind an existing alias (its old artifact stays)."
    )
    parser.add_argument(
        "--group",
        metavar="G",
        help="Share the alias with group G (one you are in): its members may replace and"
        " unregister it. Through a gateway, your own registry login for the source (in Enroot's"
        " credentials file) is sent with the import, and only G sees what it publishes.",
    )


def _timeout(parser: arguments.Parser) -> None:
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=arguments.seconds(0),
        help="Stop waiting after S seconds (exit 7).",
    )


def _registry_timeout(parser: arguments.Parser) -> None:
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=arguments.seconds(1),
        help=f"Ask registries for S seconds at most in all, every request and retry included"
        f" (default {RESOLVE_TIMEOUT_S:g}).",
    )


def _id(parser: arguments.Parser) -> None:
    parser.add_argument("lifecycle_id", metavar="ID", help="A lifecycle id.")


def _arch(parser: arguments.Parser, help_text: str) -> None:
    parser.add_argument("--arch", metavar="A", help=help_text)


def _alias(parser: arguments.Parser) -> None:
    parser.add_argument("name", metavar="NAME", help="A published alias.")


def build() -> arguments.Parser:
    """The whole command line (docs/cli.md)."""
    root, commands = arguments.root_parser(
        "Turn digest-pinned container images into verified Enroot squashfs files on Slurm."
    )
    imports = _command(commands, "import", import_command, _doc(import_command))
    imports.add_argument(
        "source",
        metavar="SOURCE",
        help="registry/repo[:tag]@sha256:<64 hex> (with --resolve: registry/repo:tag)",
    )
    _lifecycle_options(imports)
    imports.add_argument(
        "--force", action="store_true", help="Import even when the store holds this source."
    )
    imports.add_argument(
        "--resolve",
        action="store_true",
        help="SOURCE is registry/repo:TAG: pin it to the digest the registry answers now, and"
        " record the tag.",
    )
    inspects = _command(commands, "inspect", inspect_command, _doc(inspect_command))
    inspects.add_argument("source", metavar="SQSH", help="Absolute path of an existing .sqsh")
    _lifecycle_options(inspects)
    inspects.add_argument(
        "--unsigned-ok",
        action="store_true",
        help="Inspect even where the profile's [policy] requires a signature: a local .sqsh"
        " carries none (the plan records that this was asked).",
    )
    _id(_command(commands, "submit", submit_command, _doc(submit_command)))
    for name, run in (("status", status_command), ("wait", wait_command)):
        watched = _command(commands, name, run, _doc(run))
        watched.add_argument("lifecycle_ids", metavar="ID", nargs="+", help="Lifecycle ids.")
    _timeout(commands.choices["wait"])
    _id(_command(commands, "cancel", cancel_command, _doc(cancel_command)))
    logs = _command(commands, "logs", logs_command, _doc(logs_command))
    _id(logs)
    logs.add_argument("--follow", action="store_true", help="Keep printing until the job ends.")
    doctor = _command(commands, "doctor", doctor_command.run, _doc(doctor_command.run))
    doctor_command.add_options(doctor)
    figures = _command(commands, "metrics", metrics_command.run, _doc(metrics_command.run))
    metrics_command.add_options(figures)
    publishing = _command(commands, "publish", publish_command, _doc(publish_command))
    _id(publishing)
    publishing.add_argument(
        "--replace", action="store_true", help="Rebind an existing alias (its old artifact stays)."
    )
    shown = _command(commands, "show", show_command, _doc(show_command))
    _alias(shown)
    shown.add_argument(
        "--verify", action="store_true", help="Re-hash the artifact against its digest."
    )
    _arch(shown, "The alias's image for A (default: this machine's architecture).")
    stable = _command(commands, "path", path_command, _doc(path_command))
    _alias(stable)
    _arch(stable, "The alias's image for A (default: this machine's architecture).")
    stable.add_argument(
        "--pinned",
        action="store_true",
        help="Print the digest-pinned artifact's path instead (for reproducibility).",
    )
    _command(commands, "list", list_command, _doc(list_command))
    pages = _command(commands, "catalog", catalog_command, _doc(catalog_command))
    pages.add_argument(
        "--html",
        metavar="DIR",
        required=True,
        help="The folder to write the pages into (made when missing; its alias pages of aliases"
        " no longer published are removed).",
    )
    resolving = _command(commands, "resolve", resolve_command, _doc(resolve_command))
    resolving.add_argument("reference", metavar="REFERENCE", help="registry/repo:tag")
    _arch(resolving, "Also name the manifest an import for A gets (x86_64, aarch64, ppc64le).")
    _registry_timeout(resolving)
    checking = _command(commands, "outdated", outdated_command, _doc(outdated_command))
    checking.add_argument("names", metavar="NAME", nargs="*", help="Aliases (default: all).")
    _registry_timeout(checking)
    _alias(_command(commands, "unregister", unregister_command, _doc(unregister_command)))
    _id(_command(commands, "cleanup", cleanup_command, _doc(cleanup_command)))
    collect = _command(commands, "gc", gc_command, _doc(gc_command))
    collect.add_argument(
        "--older-than",
        metavar="D",
        default="7d",
        help="Finished attempts older than D (30m, 12h, 7d; default 7d).",
    )
    collect.add_argument("--dry-run", action="store_true", help="List only; remove nothing.")
    history = _command(commands, "history", history_command.run, _doc(history_command.run))
    history_command.add_options(history)
    serving = _command(commands, "serve", serve_command.run, _doc(serve_command.run))
    serve_command.add_options(serving)
    for command in commands.choices.values():
        arguments.add_json(command)
    return root


def _doc(run: Command) -> str:
    return (run.__doc__ or "").strip()
