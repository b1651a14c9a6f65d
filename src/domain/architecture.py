"""CPU architectures an image is built for (docs/enroot.md, "Multi-architecture images").

The product names them as ``uname -m`` does and Enroot's ``import -a`` takes them; registries
name them as OCI's ``platform.architecture`` does; an ELF file names them by ``e_machine``.
One table holds the three spellings. Standard library only: the catalog's cheap read uses it.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm_image.domain.errors import InvalidRecord, InvalidRequest

ARCHITECTURES = ("aarch64", "ppc64le", "x86_64")
"""The uname names, as ``enroot import -a`` takes them, sorted."""

_OCI = {"aarch64": "arm64", "ppc64le": "ppc64le", "x86_64": "amd64"}
_ELF_MACHINE = {"aarch64": 183, "ppc64le": 21, "x86_64": 62}
_RULE = f"must be one of {', '.join(ARCHITECTURES)} (uname names, as Enroot's -a takes them)"


def check_architecture(value: str, field: str = "arch") -> str:
    """``value`` when it is a uname architecture name; the OCI spelling of one (``amd64``,
    ``arm64``) is refused with the name to use, as Enroot refuses it."""
    if value in _OCI:
        return value
    for uname, oci in _OCI.items():
        if value == oci:
            raise InvalidRequest(field=field, rule=f"{_RULE}: use {uname!r}", value=value)
    raise InvalidRequest(field=field, rule=_RULE, value=value)


def oci_name(architecture: str) -> str:
    """The OCI ``platform.architecture`` (and image config ``architecture``) of ``architecture``."""
    return _OCI[check_architecture(architecture)]


def elf_machine(architecture: str) -> int:
    """The ELF ``e_machine`` of ``architecture``'s executables (binfmt_misc matches on it)."""
    return _ELF_MACHINE[check_architecture(architecture)]


def from_machine(machine: str) -> str | None:
    """The architecture ``platform.machine()`` (``uname -m``) names, or None for another."""
    return machine if machine in _OCI else None


@dataclass(frozen=True)
class BuildTarget:
    """The architecture an import is built for, and whether it is only assumed: none was named,
    the job imports for its node's own (it records which), and this is the one expected."""

    architecture: str | None
    assumed: bool = False


def build_target(asked: str | None, configured: str | None, machine: str) -> BuildTarget:
    """What an import is built for: the architecture ``asked`` for (``--arch``), else the
    profile's ``[image_build] arch`` (``configured``), else, assumed, the one of the ``machine``
    deciding (``platform.machine()`` of the gateway's node: a site whose compute nodes are of
    another architecture names it in the profile). None when nothing is named and the machine
    is of none of ``ARCHITECTURES``."""
    named = asked or configured
    if named is not None:
        return BuildTarget(named)
    assumed = from_machine(machine)
    return BuildTarget(assumed, assumed=assumed is not None)


ARCHITECTURE_RECORD_MAX_BYTES = 32
"""The job's ``architecture`` record: one name and a newline."""


def read_architecture_record(data: bytes) -> str:
    """The architecture the job recorded: exactly one uname name and a newline."""
    text = data.decode("ascii", errors="replace")
    if not text.endswith("\n") or text[:-1] not in _OCI:
        raise InvalidRecord(
            field="architecture",
            rule=f"must be one line naming one of {', '.join(ARCHITECTURES)}",
            value=text[:32],
        )
    return text[:-1]
