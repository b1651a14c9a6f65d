"""``MemorySignatures``: the Signatures port over a ``MemoryRegistry`` (the same reading of
cosign's tags and blobs as ``RegistrySignatures``, which it is made of, its lookup's time on
the registry's clock) and key files held in memory with their owner and mode, checked by the
same rules as the real ones."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from dataclasses import dataclass, field

from slurm_image.adapters.memory.registry import MemoryRegistry
from slurm_image.adapters.registry_signatures import RegistrySignatures
from slurm_image.domain import paths
from slurm_image.domain.signatures import Candidate, Rejected
from slurm_image.ports.signatures import KeyFileError, SignatureRequest

OWNER = 1000


@dataclass
class MemoryKeyFile:
    data: bytes
    mode: int = 0o644
    uid: int = OWNER
    symlink: bool = False


@dataclass
class MemorySignatures:
    """Signatures served by ``registry`` (``put`` manifests by tag and digest, ``put_blob``
    payloads), key files by path, and the directories on their way that are not 0755 root's;
    ``uid`` is the user reading them."""

    registry: MemoryRegistry = field(default_factory=MemoryRegistry)
    keys: dict[str, MemoryKeyFile] = field(default_factory=dict)
    directories: dict[str, tuple[int, int]] = field(default_factory=dict)
    """A directory's (mode, uid) where it is not 0o755 owned by root."""
    uid: int = OWNER

    def signatures_of(self, request: SignatureRequest) -> Iterator[Candidate | Rejected]:
        registry = self.registry
        return RegistrySignatures(registry, lambda: registry.now).signatures_of(request)

    def read_key_file(self, path: str, *, max_bytes: int) -> bytes:
        parent = path.rsplit("/", 1)[0] or "/"
        for directory in paths.ancestors(parent):
            mode, uid = self.directories.get(directory, (0o755, 0))
            problem = paths.shared_directory_problem(stat.S_IFDIR | mode, uid, self.uid)
            if problem is not None:
                raise KeyFileError(
                    field=path,
                    rule=f"its directory {directory} {problem}: others could replace the key",
                )
        key = self.keys.get(path)
        if key is None:
            raise KeyFileError(field=path, rule="no such file")
        if key.symlink:
            raise KeyFileError(field=path, rule="cannot be read: is a symlink, not a file")
        problem = paths.unchangeable_file_problem(stat.S_IFREG | key.mode, key.uid, self.uid)
        if problem is not None:
            raise KeyFileError(field=path, rule=f"{problem}: others could replace the key")
        if len(key.data) > max_bytes:
            raise KeyFileError(field=path, rule=f"is larger than {max_bytes} bytes")
        return key.data
