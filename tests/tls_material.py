"""Certificates the registry tests make for themselves with openssl: a CA, a server certificate
for the loopback addresses 127.0.0.1 and 127.0.0.2 (two "hosts" on one machine), and a
self-signed key pair a token service signs JWTs with.

Made once per session under a temporary directory; nothing is installed anywhere. A client
trusts the CA through ``SSL_CERT_FILE`` (``ca_file``), as Enroot's curl and ``resolve`` do.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from support import unavailable


@dataclass(frozen=True)
class TlsMaterial:
    directory: Path
    ca_file: Path
    server_cert: Path
    server_key: Path
    signing_cert: Path
    signing_key: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.server_cert, self.server_key)
        return context


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_tls_material(directory: Path) -> TlsMaterial:
    """A CA, a server certificate of 127.0.0.1, 127.0.0.2 and localhost signed by it, and a
    signing key with its self-signed certificate, all in ``directory``."""
    if shutil.which("openssl") is None:
        unavailable("openssl missing (apt-get install openssl)")
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
        "-subj", "/CN=slurm-image registry tests CA", "-keyout", "ca.key", "-out", "ca.crt",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", "server.key", "-out", "server.csr",
        cwd=directory,
    )  # fmt: skip
    (directory / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,IP:127.0.0.2,DNS:localhost\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
    )
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "30", "-extfile", "server.ext", "-out", "server.crt",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
        "-subj", "/CN=slurm-image test token issuer",
        "-keyout", "signing.key", "-out", "signing.crt",
        cwd=directory,
    )  # fmt: skip
    for name in ("ca.crt", "server.crt", "signing.crt"):
        (directory / name).chmod(0o644)
    return TlsMaterial(
        directory=directory,
        ca_file=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        signing_cert=directory / "signing.crt",
        signing_key=directory / "signing.key",
    )
