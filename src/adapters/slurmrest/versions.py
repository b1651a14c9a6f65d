"""The slurmrestd API versions this adapter speaks, and discovery of the one a server offers."""

from __future__ import annotations

import re

from slurm_image.adapters.slurmrest import (
    v0_0_38,
    v0_0_40,
    v0_0_41,
    v0_0_42,
    v0_0_43,
    v0_0_44,
    v0_0_45,
)
from slurm_image.adapters.slurmrest.client import Answer, RestClient
from slurm_image.adapters.slurmrest.errors import classify
from slurm_image.adapters.slurmrest.mapping import ApiMapping
from slurm_image.ports.submitter import SchedulerRejected

SUPPORTED: dict[str, ApiMapping] = {
    mapping.version: mapping
    for mapping in (
        v0_0_38.MAPPING,
        v0_0_40.MAPPING,
        v0_0_41.MAPPING,
        v0_0_42.MAPPING,
        v0_0_43.MAPPING,
        v0_0_44.MAPPING,
        v0_0_45.MAPPING,
    )
}
"""One mapping per version of ``domain.rest_api.REST_API_VERSIONS``, the profile's list."""
_SUBMIT_PATH = re.compile(r"^/slurm/(v0\.0\.\d+)/job/submit/?$")


def _order(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.removeprefix("v").split("."))


def mapping_for(version: str) -> ApiMapping:
    if version not in SUPPORTED:
        raise SchedulerRejected(
            field="api_version",
            rule=f"unsupported slurmrestd API version {version!r} "
            f"(supported: {', '.join(SUPPORTED)}, or auto)",
        )
    return SUPPORTED[version]


def versions_in_spec(paths: object) -> list[str]:
    """API versions whose job submission path appears in an OpenAPI ``paths`` object."""
    if not isinstance(paths, dict):
        return []
    found = {m.group(1) for path in paths if (m := _SUBMIT_PATH.match(str(path)))}
    return sorted(found, key=_order)


def discover_once(client: RestClient) -> ApiMapping:
    """The newest supported version the server offers: from ``GET /openapi/v3``, else probing."""
    answer = client.request("GET", "/openapi/v3", sent=False)
    if answer.status == 200 and answer.body is not None:
        offered = [v for v in versions_in_spec(answer.body.get("paths")) if v in SUPPORTED]
        if offered:
            return SUPPORTED[offered[-1]]
    else:
        _raise_unless_missing("discover", answer)
    for version in sorted(SUPPORTED, key=_order, reverse=True):
        probe = client.request("GET", f"/slurm/{version}/ping", sent=False)
        if probe.status == 200:
            return SUPPORTED[version]
        _raise_unless_missing("discover", probe)
    raise SchedulerRejected(
        field="api_version",
        rule=f"slurmrestd at {client.url} offers none of {', '.join(SUPPORTED)}",
    )


def _raise_unless_missing(operation: str, answer: Answer) -> None:
    if answer.status == 404:
        return
    mapping = SUPPORTED["v0.0.38"]  # every version lists errors the same way
    error = classify(
        operation,
        answer.status,
        mapping.errors(answer.body or {}),
        answer.text,
        sent=False,
    )
    if error is not None:
        raise error
