"""Removing an attempt's staged registry credentials, for every use case that ends an attempt.

The job removes them itself as soon as its import ends and in its exit trap; a job that never
ran (cancelled while queued, never submitted, killed by the node) leaves them, so ``cleanup``,
``gc`` and publication call ``remove_staged_credentials`` on every attempt they touch.
"""

from __future__ import annotations

from slurm_image.domain.credentials import staged_credentials_path
from slurm_image.ports.workspace import NotFound, Workspace


def remove_staged_credentials(workspace: Workspace, lifecycle_id: str) -> bool:
    """Remove ``enroot/config/.credentials`` of the attempt, never through a symlink on the way.

    Returns whether a file was there. Raises the workspace's errors for an unsafe path.
    """
    try:
        workspace.remove_file(staged_credentials_path(workspace.root, lifecycle_id))
    except NotFound:
        return False
    return True
