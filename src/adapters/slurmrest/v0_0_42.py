"""slurmrestd ``openapi/v0.0.42`` (Slurm 24.11).

Same request and job shapes as v0.0.41 and v0.0.44 for every field this adapter uses;
error shape from a recorded 24.11 answer (fixture rackslab-slurm-web__24.11__slurm-job-unfound).
"""

from __future__ import annotations

from slurm_image.adapters.slurmrest.data_parser import DataParserMapping

MAPPING = DataParserMapping("v0.0.42")
