"""The ``slurm-image`` command line (docs/cli.md): ``parser`` and ``arguments`` read argv, the
commands translate it into calls of what the composition root hands them (``services``) and
print the results (``output``); ``main`` turns every failure into one line and an exit code."""
