"""What ``scontrol ping``, ``scontrol show partition -o`` and ``sinfo -N`` print (Slurm 22.05,
measured on the local cluster), read into the port's ``PartitionLimits``."""

from __future__ import annotations

import re

from slurm_image.domain.partition import PartitionLimits

_UNLIMITED = frozenset({"UNLIMITED", "INFINITE", "NONE", "N/A", ""})
_DURATION = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


def duration_minutes(text: str) -> int | None:
    """A Slurm duration (``D-HH:MM:SS``, ``HH:MM:SS``, ``MM:SS``, ``MM``) in whole minutes,
    rounded up; None for ``UNLIMITED`` and anything unreadable."""
    text = text.strip()
    match = _DURATION.fullmatch(text)
    if text.upper() in _UNLIMITED or not match:
        return None
    days, first, second, third = match.groups()
    parts = [int(part) for part in (first, second, third) if part is not None]
    if days is not None:
        hours, minutes, seconds = [*parts, 0, 0, 0][:3]
    elif len(parts) == 3:
        hours, minutes, seconds = parts
    elif len(parts) == 2:
        hours, (minutes, seconds) = 0, parts
    else:
        hours, minutes, seconds = 0, parts[0], 0
    total = ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds
    return -(-total // 60)


def _number(text: str | None) -> int | None:
    if text is None or text.strip().upper() in _UNLIMITED:
        return None
    match = re.fullmatch(r"(\d+)M?", text.strip())
    return int(match.group(1)) if match else None


def scontrol_words(line: str) -> dict[str, str]:
    """``KEY=VALUE`` words of one ``scontrol show ... -o`` line."""
    return dict(word.split("=", 1) for word in line.split() if "=" in word)


def largest_node(sinfo_output: str) -> tuple[int | None, int | None]:
    """The most CPUs and the most memory (MiB) of any node in ``sinfo -h -N -o %c|%m``."""
    cpus: list[int] = []
    memory: list[int] = []
    for line in sinfo_output.splitlines():
        count, _, mem = line.strip().partition("|")
        if count.isdigit():
            cpus.append(int(count))
        if mem.isdigit():
            memory.append(int(mem))
    return (max(cpus) if cpus else None, max(memory) if memory else None)


def limits_from_scontrol(line: str, sinfo_output: str) -> PartitionLimits:
    words = scontrol_words(line)
    node_cpus, node_memory = largest_node(sinfo_output)
    return PartitionLimits(
        name=words.get("PartitionName", ""),
        state=words.get("State", "UNKNOWN"),
        max_time_minutes=duration_minutes(words.get("MaxTime", "UNLIMITED")),
        max_cpus_per_node=_number(words.get("MaxCPUsPerNode")),
        max_memory_per_node_mib=_number(words.get("MaxMemPerNode")),
        max_memory_per_cpu_mib=_number(words.get("MaxMemPerCPU")),
        node_cpus=node_cpus,
        node_memory_mib=node_memory,
    )
