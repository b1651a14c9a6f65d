"""slurmrestd ``openapi/v0.0.43`` (Slurm 25.05).

Same request and job shapes as v0.0.41 and v0.0.44 for every field this adapter uses.
"""

from __future__ import annotations

from slurm_image.adapters.slurmrest.data_parser import DataParserMapping

MAPPING = DataParserMapping("v0.0.43")
