"""slurmrestd ``openapi/v0.0.41`` (Slurm 24.05).

Request and response shapes from the published v0.0.41 specification (fixture
slinky-slurm-client__v0041__openapi), and a recorded 24.05 answer (fixture
rackslab-slurm-web__24.05__slurm-job-timeout).
"""

from __future__ import annotations

from slurm_image.adapters.slurmrest.data_parser import DataParserMapping

MAPPING = DataParserMapping("v0.0.41")
