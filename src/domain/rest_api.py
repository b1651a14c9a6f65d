"""The slurmrestd OpenAPI versions the product speaks: what a profile's ``api_version`` may name.

The REST adapter has one mapping for each of them, no more and no fewer (docs/slurm.md,
"Releases"); a version outside this list is refused when the profile is read.
"""

from __future__ import annotations

REST_API_VERSIONS = (
    "v0.0.38",
    "v0.0.40",
    "v0.0.41",
    "v0.0.42",
    "v0.0.43",
    "v0.0.44",
    "v0.0.45",
)
AUTO = "auto"
