"""``python -m slurm_image.entrypoints``: the ``slurm-image`` command."""

from slurm_image.entrypoints.cli import main

main()
