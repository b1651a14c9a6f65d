"""``python -m entrypoints``: the ``slurm-image`` command."""

from entrypoints.cli import main

main()
