"""The ``slurm-image`` command: the command line (``slurm_image.cli``) handed argv and what its
commands call (``command_api.CommandApi``), each part built when a command first asks for it."""

from __future__ import annotations

from slurm_image.cli import services
from slurm_image.cli.main import main as run_command_line
from slurm_image.composition.command_api import CommandApi


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``slurm-image``)."""
    services.install(CommandApi())
    run_command_line(argv)


if __name__ == "__main__":
    main()
