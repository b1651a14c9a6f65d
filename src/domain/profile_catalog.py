"""Which profile of a file applies here (docs/cli.md, "Several clusters in one file"): a single
profile, or one cluster of a catalog picked by ``--cluster``, this host's name, or the
catalog's default. Standard library only: ``profile.select_cluster`` validates the choice,
and a catalog read needs only its ``workspace_root``."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from slurm_image.domain.errors import InvalidProfile

How = Literal["explicit", "hostname", "default"]


@dataclass(frozen=True)
class ProfileChoice:
    """The chosen profile table (``host_patterns`` removed) and how it was chosen."""

    table: dict[str, Any]
    how: How
    cluster: str | None = None
    pattern: str | None = None

    @property
    def prefix(self) -> str:
        """What a field of this table is called in errors."""
        return "" if self.cluster is None else f"clusters.{self.cluster}."


def is_catalog(document: Mapping[str, Any]) -> bool:
    return "clusters" in document


def choose_profile(
    document: Mapping[str, Any], *, explicit: str | None, hostnames: Sequence[str]
) -> ProfileChoice:
    """Precedence: ``explicit`` > the one cluster whose pattern matches a host name >
    ``default``. Raises ``InvalidProfile``."""
    if not is_catalog(document):
        if explicit is not None:
            raise InvalidProfile(field="cluster", rule="the profile file has no [clusters] catalog")
        return ProfileChoice(table=dict(document), how="explicit")
    extra = set(document) - {"clusters", "default"}
    if extra:
        raise InvalidProfile(
            field=sorted(extra)[0], rule="a catalog holds only 'default' and [clusters.*]"
        )
    clusters = document["clusters"]
    if not isinstance(clusters, Mapping) or not clusters:
        raise InvalidProfile(field="clusters", rule="must be a table of clusters")
    for cluster_name, table in clusters.items():
        if not isinstance(table, Mapping):
            raise InvalidProfile(field=f"clusters.{cluster_name}", rule="must be a table")
        patterns = table.get("host_patterns", [])
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise InvalidProfile(
                field=f"clusters.{cluster_name}.host_patterns", rule="must be a list of strings"
            )
    how: How = "explicit"
    matched: str | None = None
    if explicit is not None:
        if explicit not in clusters:
            raise InvalidProfile(field="cluster", rule=f"{explicit!r} is not in the catalog")
        chosen = explicit
    else:
        hits: list[tuple[str, str]] = []
        for cluster_name, table in clusters.items():
            for pattern in table.get("host_patterns", []):
                if any(fnmatch.fnmatchcase(host, pattern) for host in hostnames):
                    hits.append((cluster_name, pattern))
                    break
        if len({hit[0] for hit in hits}) > 1:
            names = ", ".join(hit[0] for hit in hits)
            raise InvalidProfile(
                field="clusters", rule=f"this host matches several clusters: {names}"
            )
        if hits:
            chosen, matched, how = hits[0][0], hits[0][1], "hostname"
        elif "default" in document:
            chosen, how = str(document["default"]), "default"
            if chosen not in clusters:
                raise InvalidProfile(field="default", rule=f"{chosen!r} is not in the catalog")
        else:
            host = hostnames[0] if hostnames else "?"
            raise InvalidProfile(
                field="cluster", rule=f"no cluster matches host {host!r} and no default is set"
            )
    table = dict(clusters[chosen])
    table.pop("host_patterns", None)
    return ProfileChoice(table=table, how=how, cluster=chosen, pattern=matched)
