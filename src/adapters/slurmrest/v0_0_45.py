"""slurmrestd ``openapi/v0.0.45`` (Slurm 26.05).

Same request, job and error shapes as v0.0.42 to v0.0.44 for every field this adapter uses,
measured on Slurm 26.05.5 (fixtures local-slurmrestd-26.05.5__v0.0.45__*); the ping entries
have no ``pinged``/``mode`` but a ``status`` text (``controller_entries`` reads both forms).
"""

from __future__ import annotations

from slurm_image.adapters.slurmrest.data_parser import DataParserMapping

MAPPING = DataParserMapping("v0.0.45")
