"""Registry credentials for the use cases: the one entry of the user's credentials file a
registry gets, and removing an attempt's staged copy.

``read_registry_credentials`` is the one way a use case takes credentials from the profile's
``enroot.credentials_file`` (the file's rules: ``ports.credentials``; the entry's:
``domain.credentials``): the import stages the entry for Enroot, ``resolve`` sends it to the
registry itself.

The job removes the staged file itself as soon as its import ends and in its exit trap; a job
that never ran (cancelled while queued, never submitted, killed by the node) leaves it, so
``cleanup``, ``gc`` and publication call ``remove_staged_credentials`` on every attempt they
touch.
"""

from __future__ import annotations

from slurm_image.domain.credentials import (
    CREDENTIALS_MAX_BYTES,
    RegistryCredentials,
    registry_host,
    select_credentials,
    staged_credentials_path,
)
from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.profile import SiteProfile
from slurm_image.domain.reference import parse_reference
from slurm_image.domain.request import Request
from slurm_image.ports.credentials import FIELD as CREDENTIALS_FIELD
from slurm_image.ports.credentials import CredentialsFile, CredentialsFileError
from slurm_image.ports.workspace import NotFound, Workspace


def read_registry_credentials(
    profile: SiteProfile, credentials_file: CredentialsFile | None, registry: str
) -> RegistryCredentials | None:
    """The entry of the profile's ``credentials_file`` for ``registry`` (host[:port] as Enroot
    contacts it), or None without a file or without an entry (anonymous). Raises
    ``CredentialsFileError`` for a file that is not the user's own private one, and
    ``InvalidProfile`` for one that is not netrc text."""
    path = profile.enroot.credentials_file
    if path is None:
        return None
    if credentials_file is None:
        raise CredentialsFileError(
            field=CREDENTIALS_FIELD, rule="no reader for credentials files was configured"
        )
    data = credentials_file.read_credentials_file(path, max_bytes=CREDENTIALS_MAX_BYTES)
    return select_credentials(data, registry)


def remove_staged_credentials(workspace: Workspace, lifecycle_id: str) -> bool:
    """Remove ``enroot/config/.credentials`` of the attempt, never through a symlink on the way.

    Returns whether a file was there. Raises the workspace's errors for an unsafe path.
    """
    try:
        workspace.remove_file(staged_credentials_path(workspace.root, lifecycle_id))
    except NotFound:
        return False
    return True


def check_given_credentials(registry: str, credentials: RegistryCredentials) -> None:
    """Credentials sent with a request (through the gateway) must be ``registry``'s entry."""
    if credentials.host != registry_host(registry):
        raise InvalidRequest(
            field="credentials",
            rule=f"are for {credentials.host}, not the source's registry {registry_host(registry)}",
        )


def check_request_credentials(request: Request, credentials: RegistryCredentials | None) -> None:
    """Credentials sent with a request (through the gateway) are its registry's entry, for an
    import that says it is private to a group: what they pull is that group's alone."""
    if credentials is None:
        return
    if request.operation != "import_oci":
        raise InvalidRequest(field="credentials", rule="only an import uses registry credentials")
    check_given_credentials(parse_reference(request.source).enroot_registry, credentials)
    if not request.private:
        raise InvalidRequest(
            field="group",
            rule="an import with your own registry credentials is private: name the group that"
            " may see it (--group)",
        )
