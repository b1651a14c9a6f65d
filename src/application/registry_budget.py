"""The time one command may spend asking registries (docs/design.md, "Resolving a tag"):
``outdated --timeout`` and the signature check bound the whole command, not each request.
Each request is given what is left (``ManifestRequest.timeout_s``, which the ``Registry``
port keeps as the deadline of everything that request does); once nothing is left, the
requests not yet made fail as a registry that did not answer in time."""

from __future__ import annotations

from slurm_image.ports.clock import Clock
from slurm_image.ports.registry import RegistryUnavailable


class RegistryBudget:
    """``timeout_s`` seconds from now, on ``clock``, shared by every request of one command."""

    def __init__(self, clock: Clock, timeout_s: float) -> None:
        self._clock = clock
        self.timeout_s = timeout_s
        self._started = clock.now()

    def left(self, field: str, what: str) -> float:
        """The seconds left for the next request; ``RegistryUnavailable`` (``field``: the
        registry or reference it was for, ``what``: the request) when none are."""
        spent = (self._clock.now() - self._started).total_seconds()
        left = self.timeout_s - spent
        if left <= 0:
            raise RegistryUnavailable(
                field=field,
                rule=f"{what} was not asked: the {self.timeout_s:g} s the command may spend"
                " asking registries were spent",
            )
        return left
