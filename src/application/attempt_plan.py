"""Read the plan an attempt staged, as the history's events (``application.history``) and the
rule of who may know of a lifecycle (``application.lifecycle_rights``) both need it: verified,
and None when it cannot be read."""

from __future__ import annotations

import logging

from slurm_image.application.errors import ApplicationError
from slurm_image.application.records import attempt_directory
from slurm_image.domain.errors import DomainError
from slurm_image.domain.plan import PLAN_MAX_BYTES, Plan, load_plan
from slurm_image.ports.workspace import Workspace, WorkspaceError

log = logging.getLogger(__name__)


def attempt_plan(workspace: Workspace, lifecycle_id: str) -> Plan | None:
    """The attempt's plan, or None when it cannot be read (said in the log)."""
    try:
        layout, identity = attempt_directory(workspace, lifecycle_id)
        data = workspace.read_verified(layout.plan, max_bytes=PLAN_MAX_BYTES, within=identity)
        return load_plan(data.data)
    except (WorkspaceError, DomainError, ApplicationError) as error:
        log.info("the history names %s without its plan: %s", lifecycle_id, error)
        return None
