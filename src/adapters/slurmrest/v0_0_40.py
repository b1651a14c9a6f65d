"""slurmrestd ``openapi/v0.0.40`` (Slurm 23.11).

Request shapes from the v0.0.40 specification (job_desc_msg as published in the
generated client documentation, fixture mever-team-slurm-rest-py__V0040JobDescMsg); response
shapes from a recorded 23.11 answer (fixture rackslab-slurm-web__23.11__slurm-job-failed).
"""

from __future__ import annotations

from slurm_image.adapters.slurmrest.data_parser import DataParserMapping

MAPPING = DataParserMapping("v0.0.40")
