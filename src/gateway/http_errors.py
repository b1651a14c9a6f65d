"""The product's errors as HTTP answers (docs/gateway.md, "Errors"): one body,
``{"error": {"field", "rule", "exit_code"}}``, with a status that fits; never a traceback, never
a secret (the rule is the same one line the command line prints)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slurm_image.wire import exit_codes as codes

if TYPE_CHECKING:
    from slurm_image.domain.errors import SlurmImageError

STATUS_OF_EXIT = {
    codes.EXIT_INVALID: 400,
    codes.EXIT_SCHEDULER: 503,
    codes.EXIT_JOB_FAILED: 422,
    codes.EXIT_VERIFICATION: 422,
    codes.EXIT_CONFLICT: 409,
    codes.EXIT_WAIT_TIMEOUT: 408,
    codes.EXIT_REGISTRY_ANSWER: 502,
    codes.EXIT_OUTDATED: 200,
    codes.EXIT_UNSIGNED: 422,
    codes.EXIT_FORBIDDEN: 403,
    codes.EXIT_NOT_AUTHENTICATED: 401,
    codes.EXIT_BUSY: 429,
}


def status_for(error: SlurmImageError, exit_code: int) -> int:
    """The HTTP status of ``error``: not found for what names nothing (an alias, a lifecycle, a
    tag), bad gateway for a registry's failure, unavailable while the gateway stops, else by
    its exit code; 500 for anything the product did not mean to raise."""
    from slurm_image.application.errors import UnknownAlias, UnknownLifecycle
    from slurm_image.domain.errors import GatewayStopping
    from slurm_image.ports.registry import RegistryError, RegistryNotFound

    if isinstance(error, UnknownAlias | UnknownLifecycle | RegistryNotFound):
        return 404
    if isinstance(error, GatewayStopping):
        return 503
    if isinstance(error, RegistryError):
        return 502
    return STATUS_OF_EXIT.get(exit_code, 500)


def retry_after(error: BaseException) -> int | None:
    from slurm_image.domain.errors import Busy

    return error.retry_after_s if isinstance(error, Busy) else None
