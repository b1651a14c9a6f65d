"""The slurmrestd submitter: an HTTP client, and one small mapping per REST API version."""

from slurm_image.adapters.slurmrest.submitter import RestSubmitter

__all__ = ["RestSubmitter"]
