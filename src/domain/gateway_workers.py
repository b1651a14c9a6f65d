"""How many processes serve one gateway (``slurm-image serve --workers N``, docs/gateway.md,
"Deployment"): each takes connections from the same listening sockets and answers them alone,
so the gateway uses as many cores as it has workers."""

from __future__ import annotations

from slurm_image.domain.errors import InvalidRequest

DEFAULT_WORKERS = 1
"""One process: every limit the gateway counts is counted once for the whole gateway."""
MAX_WORKERS = 64
FIELD = "workers"


def workers(text: str) -> int:
    """``--workers``: a whole number from 1 to ``MAX_WORKERS``; ``InvalidRequest`` naming
    ``workers`` otherwise."""
    value = text.strip()
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= MAX_WORKERS:
        raise InvalidRequest(
            field=FIELD, rule=f"{text!r}: must be a whole number from 1 to {MAX_WORKERS}"
        )
    return int(value)
