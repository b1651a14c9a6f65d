"""The composition root: the one place that builds objects and imports the adapters. The
container (``container``, ``factories``) builds everything from the site profile
(``profile_loader``, ``site_policy``); ``api.Lifecycles`` is the Python API over it;
``command_api`` and ``lookup`` build what a command calls; ``main`` is the ``slurm-image``
command, handing argv to the command line (``slurm_image.cli``) with what it calls, and
``serve`` starts the gateway (``slurm_image.gateway``)."""
