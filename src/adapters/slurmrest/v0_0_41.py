"""slurmrestd ``openapi/v0.0.41`` (Slurm 24.05).

Request and response shapes from the published v0.0.41 specification (fixture
slinky-slurm-client__v0041__openapi), and a recorded 24.05 answer (fixture
rackslab-slurm-web__24.05__slurm-job-timeout).
"""

from __future__ import annotations

from slurm_image.adapters.slurmrest.data_parser import DataParserMapping

# A cancel of an unknown job answers 200 without an error (measured on 24.11.5).
MAPPING = DataParserMapping("v0.0.41", cancel_names_unknown_jobs=False)
