"""``python -m slurm_image.composition``: the ``slurm-image`` command."""

from slurm_image.composition.main import main

main()
