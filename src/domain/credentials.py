"""Registry credentials: the one netrc entry an import stages for Enroot (docs/enroot.md,
"Credentials").

Enroot reads ``$ENROOT_CONFIG_PATH/.credentials`` (netrc) and matches an entry by the host it
contacts WITHOUT the port: ``machine 127.0.0.1`` serves ``127.0.0.1:5443``, ``machine
127.0.0.1:5443`` is never matched. From the user's own file only the entry for the source's
registry is taken (one written for that host with its port wins over one without), and it is
staged as ``machine HOST login L password P`` — the form Enroot matches. Nothing here ever puts a
login's password in an error, a repr or a log line.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidProfile

FIELD = "enroot.credentials_file"
CREDENTIALS_NAME = ".credentials"
"""The file name Enroot reads in its config directory."""
CREDENTIALS_MODE = 0o600
CREDENTIALS_MAX_BYTES = 64 * 1024
_KEYWORDS = frozenset({"machine", "default", "login", "password", "account", "macdef"})


def staged_credentials_path(workspace_root: str, lifecycle_id: str) -> str:
    """Where an attempt's credentials are staged: its private Enroot config directory.

    ``cleanup``, ``gc`` and publication remove this file when they meet an attempt; the job's
    exit trap removes it too. The same path as ``AttemptPaths.enroot_config`` + ``/.credentials``.
    """
    return paths.AttemptLayout(workspace_root, lifecycle_id).in_job(
        f"enroot/config/{CREDENTIALS_NAME}"
    )


def registry_host(registry: str) -> str:
    """The host Enroot matches in the netrc: ``registry`` without its port (and brackets)."""
    if registry.startswith("["):
        return registry[1 : registry.index("]")]
    return registry.split(":", 1)[0]


@dataclass(frozen=True)
class RegistryCredentials:
    """One login for one registry host, as Enroot will match it; ``machine`` is the entry's
    ``machine`` as written in the user's file (``HOST`` or ``HOST:PORT``)."""

    host: str
    login: str
    password: str = field(repr=False)
    machine: str | None = field(default=None, compare=False)

    def describe(self) -> str:
        """The entry named without its password: ``machine M login L``."""
        return f"machine {self.machine or self.host} login {self.login}"

    def basic(self) -> str:
        """The ``Authorization`` value of HTTP Basic with this login (a secret, as the
        password is)."""
        pair = f"{self.login}:{self.password}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")

    def secrets(self) -> tuple[str, ...]:
        """What of this entry a registry may echo and an error must never print: the password
        and the base64 that Basic sends (``domain.registry_text``)."""
        return (self.password, self.basic().removeprefix("Basic "))

    def netrc_bytes(self) -> bytes:
        """The staged file: one line in the form Enroot (curl) matches."""
        return f"machine {self.host} login {self.login} password {self.password}\n".encode()


@dataclass
class _Entry:
    machine: str | None
    values: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[str]:
    """The netrc tokens, without ``macdef`` bodies (they run to the next empty line)."""
    tokens: list[str] = []
    in_macro = False
    for line in text.splitlines():
        if in_macro:
            in_macro = bool(line.strip())
            continue
        words = line.split()
        if "macdef" in words:
            words = words[: words.index("macdef")]
            in_macro = True
        tokens.extend(words)
    return tokens


def _entries(text: str) -> list[_Entry]:
    entries: list[_Entry] = []
    words = _tokens(text)
    position = 0
    while position < len(words):
        keyword = words[position]
        if keyword == "default":
            entries.append(_Entry(machine=None))
            position += 1
            continue
        if keyword not in _KEYWORDS:
            raise InvalidProfile(field=FIELD, rule="is not in netrc format (unexpected word)")
        if position + 1 >= len(words):
            raise InvalidProfile(
                field=FIELD, rule=f"is not in netrc format ({keyword} has no value)"
            )
        value = words[position + 1]
        if value.startswith('"'):
            raise InvalidProfile(
                field=FIELD, rule=f"the {keyword} is quoted; quoted values are not supported"
            )
        if keyword == "machine":
            entries.append(_Entry(machine=value))
        elif not entries:
            raise InvalidProfile(
                field=FIELD, rule=f"is not in netrc format ({keyword} before any machine)"
            )
        else:
            entries[-1].values[keyword] = value
        position += 2
    return entries


def select_credentials(data: bytes, registry: str) -> RegistryCredentials | None:
    """The entry of the netrc ``data`` for ``registry`` (host[:port] as Enroot contacts it).

    ``machine HOST:PORT`` for exactly that registry wins over ``machine HOST``; a ``default``
    entry is never used (it would send the login to every registry). None: no entry, the import
    runs anonymously. Raises ``InvalidProfile`` (field ``enroot.credentials_file``) for a file
    that is not netrc text or an entry that cannot be staged as Enroot reads it.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidProfile(field=FIELD, rule="is not UTF-8 text") from None
    host = registry_host(registry)
    wanted = [registry.lower(), host.lower()] if registry != host else [host.lower()]
    found: _Entry | None = None
    for name in wanted:
        found = next(
            (e for e in _entries(text) if e.machine is not None and e.machine.lower() == name),
            None,
        )
        if found is not None:
            break
    if found is None:
        return None
    login = found.values.get("login")
    password = found.values.get("password")
    if not login or not password:
        raise InvalidProfile(
            field=FIELD, rule=f"the entry for {found.machine} needs a login and a password"
        )
    for what, value in (("login", login), ("password", password)):
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
            raise InvalidProfile(
                field=FIELD, rule=f"the {what} for {found.machine} holds a control character"
            )
    return RegistryCredentials(host=host, login=login, password=password, machine=found.machine)
