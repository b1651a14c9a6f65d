"""slurmrestd ``openapi/v0.0.40`` (Slurm 23.11).

Request shapes from the v0.0.40 specification (job_desc_msg as published in the
generated client documentation, fixture mever-team-slurm-rest-py__V0040JobDescMsg); response
shapes from a recorded 23.11 answer (fixture rackslab-slurm-web__23.11__slurm-job-failed).
"""

from __future__ import annotations

from slurm_image.adapters.slurmrest.data_parser import DataParserMapping

# A cancel of an unknown job answers 200 without an error (measured on 24.11.5).
MAPPING = DataParserMapping("v0.0.40", cancel_names_unknown_jobs=False)
