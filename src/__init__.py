"""slurm-image-lifecycle: digest-pinned container images to verified Enroot squashfs files on Slurm.

Installed, the folders under ``src/`` form this one package: ``slurm_image.domain``,
``slurm_image.ports``, ``slurm_image.application``, ``slurm_image.adapters``,
``slurm_image.inspector`` and ``slurm_image.entrypoints``. Importing it imports nothing else.
"""
