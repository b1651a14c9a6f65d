"""slurmrestd ``openapi/v0.0.44`` (Slurm 25.11).

Request and response shapes from the published v0.0.44 specification (fixture
slinky-slurm-client__v0044__openapi): the submit answer has no ``result`` object any more.
"""

from __future__ import annotations

from slurm_image.adapters.slurmrest.data_parser import DataParserMapping

MAPPING = DataParserMapping("v0.0.44")
