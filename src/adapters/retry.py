"""The retry and exactly-once rules under their older import path.

They live in the submitter kit, ``slurm_image.submitters``, which a site's package may import;
this module names the same objects for the code and tests that import them from here.
"""

from slurm_image.submitters import (
    RetryPolicy,
    TransientFailure,
    submit_exactly_once,
    submit_spec_exactly_once,
    with_retries,
)

__all__ = [
    "RetryPolicy",
    "TransientFailure",
    "submit_exactly_once",
    "submit_spec_exactly_once",
    "with_retries",
]
