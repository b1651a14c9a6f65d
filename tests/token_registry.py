"""A real registry with Bearer token auth, for the tests: Debian's ``docker-registry``
(distribution 2.8) configured with ``auth: token`` and TLS by certificates the tests make
(``tls_material``), and a small token service of the tests' own that issues the JWTs it trusts.

The token service is an HTTPS server on 127.0.0.2 (the realm is another host than the registry,
as auth.docker.io is for Docker Hub). ``GET /token?service=S&scope=repository:NAME:ACTIONS``
answers ``{"token", "access_token", "expires_in"}``: a JWT signed RS256 by the signing key,
whose certificate travels in the header's ``x5c`` and is the registry's ``rootcertbundle``;
the claims are those distribution's token auth checks (``iss``, ``aud`` = the service,
``exp``/``nbf``/``iat``, ``access``). A login of ``accounts`` (Basic) gets what it asks for;
anyone gets ``pull`` of a ``public`` repository; a wrong password gets 401.

``docker-registry`` is started in its own session and stopped by its pid when the fixture ends.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from scripted_registry import Seen, Server, basic_login, send
from support import unavailable
from tls_material import TlsMaterial

SERVICE = "slurm-image-token-test"
ISSUER = "slurm-image-test-issuer"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class JwtTokenService:
    """The realm (see the module docstring)."""

    def __init__(
        self, tls: TlsMaterial, accounts: dict[str, str], public: set[str], lifetime: int = 300
    ) -> None:
        self.tls = tls
        self.accounts = accounts
        self.public = public
        self.lifetime = lifetime
        der = subprocess.run(
            ["openssl", "x509", "-in", str(tls.signing_cert), "-outform", "DER"],
            check=True,
            capture_output=True,
        ).stdout
        self._x5c = base64.b64encode(der).decode()
        self.server = Server("127.0.0.2", self._respond, tls.server_context(), lifetime=3600)

    @property
    def realm(self) -> str:
        return f"{self.server.url}/token"

    @property
    def seen(self) -> list[Seen]:
        return self.server.seen

    def _sign(self, claims: dict[str, object]) -> str:
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self._x5c]}
        signing_input = (
            f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        )
        signature = subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", str(self.tls.signing_key)],
            input=signing_input.encode(),
            check=True,
            capture_output=True,
        ).stdout
        return f"{signing_input}.{_b64url(signature)}"

    def _respond(self, handler: BaseHTTPRequestHandler) -> None:
        url = urllib.parse.urlsplit(handler.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path != "/token" or query.get("service") != [SERVICE]:
            send(handler, 400, b'{"errors": [{"code": "UNSUPPORTED"}]}')
            return
        login = basic_login(handler.headers.get("Authorization"), self.accounts)
        if login is False:
            send(handler, 401, b'{"errors": [{"code": "UNAUTHORIZED"}]}')
            return
        access = []
        for scope in query.get("scope", []):
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind != "repository" or not name:
                continue
            if isinstance(login, str):
                granted = [action for action in actions.split(",") if action in ("pull", "push")]
            else:
                granted = ["pull"] if name in self.public and "pull" in actions else []
            if granted:
                access.append({"type": "repository", "name": name, "actions": granted})
        now = int(time.time())
        claims: dict[str, object] = {
            "iss": ISSUER,
            "sub": login if isinstance(login, str) else "",
            "aud": SERVICE,
            "exp": now + self.lifetime,
            "nbf": now - 10,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        token = self._sign(claims)
        body = json.dumps({"token": token, "access_token": token, "expires_in": self.lifetime})
        send(handler, 200, body.encode(), {"Content-Type": "application/json"})

    def close(self) -> None:
        self.server.close()


@dataclass(frozen=True)
class TokenRegistry:
    address: str
    realm: str
    user: str
    password: str
    ca_file: Path
    service: JwtTokenService


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _challenge(address: str, ca_file: Path) -> str | None:
    context = __import__("ssl").create_default_context(cafile=str(ca_file))
    try:
        urllib.request.urlopen(f"https://{address}/v2/", timeout=2, context=context)
    except urllib.error.HTTPError as error:
        return error.headers.get("WWW-Authenticate") if error.code == 401 else None
    except OSError:
        return None
    return None


@contextmanager
def token_registry(
    directory: Path, tls: TlsMaterial, *, public: set[str], user: str = "slurm-image-token"
) -> Iterator[TokenRegistry]:
    """``docker-registry`` with token auth and its realm, up for the ``with`` block."""
    if shutil.which("docker-registry") is None:
        unavailable("docker-registry missing (apt-get install docker-registry)")
    password = secrets.token_hex(16)
    service = JwtTokenService(tls, {user: password}, public)
    address = f"127.0.0.1:{_free_port()}"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "storage").mkdir(exist_ok=True)
    config = directory / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {directory / 'storage'}\n"
        "  delete:\n    enabled: true\n"
        "auth:\n  token:\n"
        f"    realm: {service.realm}\n    service: {SERVICE}\n    issuer: {ISSUER}\n"
        f"    rootcertbundle: {tls.signing_cert}\n"
        f"http:\n  addr: {address}\n  tls:\n"
        f"    certificate: {tls.server_cert}\n    key: {tls.server_key}\n"
    )
    log = (directory / "registry.log").open("ab")
    process = subprocess.Popen(
        ["docker-registry", "serve", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while (challenge := _challenge(address, tls.ca_file)) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                tail = (directory / "registry.log").read_text()[-2000:]
                raise AssertionError(f"docker-registry with token auth did not start:\n{tail}")
            time.sleep(0.1)
        assert challenge.startswith("Bearer ") and service.realm in challenge, challenge
        yield TokenRegistry(address, service.realm, user, password, tls.ca_file, service)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()
        service.close()


def skopeo_copy(
    source: str,
    target: str,
    *,
    ca_file: Path,
    work: Path,
    creds: str | None = None,
    all_images: bool = False,
) -> None:
    """``skopeo copy`` of ``source`` (the open local registry) to ``target`` (a TLS registry
    trusting ``ca_file``), digests preserved."""
    certs = work / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    shutil.copy(ca_file, certs / "ca.crt")
    command = ["skopeo", "copy", "--quiet", "--preserve-digests", "--src-tls-verify=false",
               "--dest-cert-dir", str(certs)]  # fmt: skip
    if all_images:
        command.append("--all")
    else:
        command += ["--format", "v2s2"]
    if creds is not None:
        command += ["--dest-creds", creds]
    env = {**os.environ, "SSL_CERT_FILE": str(ca_file)}  # the token realm, for skopeo's client
    subprocess.run([*command, f"docker://{source}", f"docker://{target}"], check=True,
                   timeout=600, env=env)  # fmt: skip


def skopeo_raw(
    reference: str, *, ca_file: Path | None = None, creds: str | None = None, work: Path
) -> bytes:
    """``skopeo inspect --raw`` of ``reference``: the manifest bytes the registry serves."""
    command = ["skopeo", "inspect", "--raw"]
    env = dict(os.environ)
    if ca_file is None:
        command.append("--tls-verify=false")
    else:
        certs = work / "inspect-certs"
        certs.mkdir(parents=True, exist_ok=True)
        shutil.copy(ca_file, certs / "ca.crt")
        command += ["--cert-dir", str(certs)]
        env["SSL_CERT_FILE"] = str(ca_file)
    if creds is not None:
        command += ["--creds", creds]
    return subprocess.run(
        [*command, f"docker://{reference}"], check=True, capture_output=True, timeout=120, env=env
    ).stdout
