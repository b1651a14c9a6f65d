"""The Signatures port: the cosign signatures a registry holds for a digest, and the policy's
public key files (docs/design.md, "Image policy and signatures").

``signatures_of`` returns every signature found for the digest, in both cosign formats
(``domain.signatures``), not yet verified: whether one verifies against a policy key and
names the pin is the use case's to decide. No signature of either format is an empty answer,
not an error. An adapter asks the registry under the ``Registry`` port's rules (reads bounded
by ``max_bytes``, credentials only where that port sends them).

Errors: ``SignatureRefused`` (domain) for signature material that is malformed, too large, or
answered for another digest; the ``Registry`` port's errors (``RegistryUnavailable``,
``RegistryAuthFailed``, ``RegistryRejected``, ``AnswerRefused``) as they are.

``read_key_file`` returns the bytes of a key file, refused with ``KeyFileError`` (``field``:
the path) unless it is a regular file (no symlink followed) owned by the user or root that
group and others cannot write, in directories held to ``domain.paths.shared_directory_problem``
(``domain.paths.unchangeable_file_problem``): a key someone else could replace would let them
choose what is trusted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.errors import SlurmImageError

if TYPE_CHECKING:  # the error table imports this module: it loads no cryptography
    from slurm_image.domain.signatures import Candidate


class KeyFileError(SlurmImageError):
    """A policy key file that cannot be trusted or read: ``field`` is its path."""


@dataclass(frozen=True)
class SignatureRequest:
    """The signatures of ``digest`` in ``repository`` of ``registry`` (host[:port] as the API is
    asked), with the ``Registry`` port's settings."""

    registry: str
    repository: str
    digest: str
    max_bytes: int
    timeout_s: float
    allow_http: bool = False
    credentials: RegistryCredentials | None = field(default=None, repr=False)


@runtime_checkable
class Signatures(Protocol):
    def signatures_of(self, request: SignatureRequest) -> tuple[Candidate, ...]:
        """Every cosign signature of ``request.digest`` (module docstring)."""
        ...

    def read_key_file(self, path: str, *, max_bytes: int) -> bytes:
        """The bytes of the key file ``path`` (module docstring)."""
        ...
