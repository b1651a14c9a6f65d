"""The Signatures port: the cosign signatures a registry holds for a digest, and the policy's
public key files (docs/design.md, "Image policy and signatures").

``signatures_of`` yields every signature found for the digest, in both cosign formats
(``domain.signatures``), not yet verified, and in its place a ``Rejected`` for each piece of
signature material that is none (a referrer of another subject, malformed, missing, too large
or answered as the product will not read it): whether one verifies against a policy key and
names the pin is the use case's to decide, and one bad piece never hides a good one. No
signature of either format yields nothing. It asks the registry as it is read (the bundle
referrers first, in the index's order, then the ``.sig`` manifest), so a reader that stops at
the first signature it accepts asks nothing more. An adapter asks the registry under the
``Registry`` port's rules (reads bounded by ``max_bytes``, credentials only where that port
sends them), and bounds one digest's lookup as a whole:

- at most ``SIGNATURE_REQUESTS_MAX`` requests: past them it yields a last ``Rejected`` saying
  it looked no further, and stops;
- at most ``timeout_s`` for all of them, each request given what is left: past it,
  ``RegistryUnavailable`` (the registry did not answer in time).

Errors: the ``Registry`` port's ``RegistryUnavailable``, ``RegistryAuthFailed`` and
``RegistryRejected`` as they are (a registry that cannot be asked, not signature material).

``read_key_file`` returns the bytes of a key file, refused with ``KeyFileError`` (``field``:
the path) unless it is a regular file (no symlink followed) owned by the user or root that
group and others cannot write, in directories held to ``domain.paths.shared_directory_problem``
(``domain.paths.unchangeable_file_problem``): a key someone else could replace would let them
choose what is trusted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.errors import SlurmImageError

if TYPE_CHECKING:  # the error table imports this module: it loads no cryptography
    from slurm_image.domain.signatures import Candidate, Rejected


class KeyFileError(SlurmImageError):
    """A policy key file that cannot be trusted or read: ``field`` is its path."""


@dataclass(frozen=True)
class SignatureRequest:
    """The signatures of ``digest`` in ``repository`` of ``registry`` (host[:port] as the API is
    asked), with the ``Registry`` port's settings; ``timeout_s`` is the time the whole lookup
    may take."""

    registry: str
    repository: str
    digest: str
    max_bytes: int
    timeout_s: float
    allow_http: bool = False
    credentials: RegistryCredentials | None = field(default=None, repr=False)


@runtime_checkable
class Signatures(Protocol):
    def signatures_of(self, request: SignatureRequest) -> Iterator[Candidate | Rejected]:
        """Every cosign signature of ``request.digest``, and what was rejected (module
        docstring)."""
        ...

    def read_key_file(self, path: str, *, max_bytes: int) -> bytes:
        """The bytes of the key file ``path`` (module docstring)."""
        ...
