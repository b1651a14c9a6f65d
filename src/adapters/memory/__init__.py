"""In-memory adapters of the ports, for behavioural tests and dry demos: one module per port.

Product code held to the same contract suites as the real adapters (tests/contract/).
"""

from slurm_image.adapters.memory.accounts import MemoryAccounts
from slurm_image.adapters.memory.clock import FakeClock
from slurm_image.adapters.memory.credentials import MemoryCredentialsFile
from slurm_image.adapters.memory.filesystem import FakeFilesystems
from slurm_image.adapters.memory.history import MemoryHistory
from slurm_image.adapters.memory.lock import MemoryLocks
from slurm_image.adapters.memory.munge import (
    MemoryAuthenticator,
    MemoryCredentialSource,
    MemoryMunge,
)
from slurm_image.adapters.memory.registry import MemoryRegistry, MemoryRegistryHost
from slurm_image.adapters.memory.signatures import MemoryKeyFile, MemorySignatures
from slurm_image.adapters.memory.store import MemoryStore
from slurm_image.adapters.memory.submitter import FailureKind, FakeJob, FakeSubmitter, Operation
from slurm_image.adapters.memory.workspace import (
    NOBODY,
    MemoryFilesystem,
    MemoryNode,
    MemoryWorkspace,
)

__all__ = [
    "NOBODY",
    "FailureKind",
    "FakeClock",
    "FakeFilesystems",
    "FakeJob",
    "FakeSubmitter",
    "MemoryAccounts",
    "MemoryAuthenticator",
    "MemoryCredentialSource",
    "MemoryCredentialsFile",
    "MemoryFilesystem",
    "MemoryHistory",
    "MemoryKeyFile",
    "MemoryLocks",
    "MemoryMunge",
    "MemoryNode",
    "MemoryRegistry",
    "MemoryRegistryHost",
    "MemorySignatures",
    "MemoryStore",
    "MemoryWorkspace",
    "Operation",
]
