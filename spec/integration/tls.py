"""A certificate authority of the test's own, made with the `openssl` command, and a
server certificate it signed for 127.0.0.1: a subscriber "behind an internal CA"."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
SERVER_EXTENSIONS = (
    "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\n"
    "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
)


CLIENT_EXTENSIONS = (
    "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
    "extendedKeyUsage=clientAuth\n"
)


@dataclass(frozen=True)
class InternalCA:
    ca: Path  # the CA's certificate: what BUSBAR_CA_BUNDLE points at
    cert: Path  # the server's certificate, signed by the CA
    key: Path


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_internal_ca(where: Path) -> InternalCA:
    if shutil.which("openssl") is None:
        pytest.fail("the CA bundle tests need the `openssl` command: apt-get install openssl")
    where.mkdir(parents=True, exist_ok=True)
    openssl("req", "-x509", *EC, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=busbar test internal CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=where)  # fmt: skip
    openssl("req", *EC, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1",
            cwd=where)  # fmt: skip
    (where / "server.ext").write_text(SERVER_EXTENSIONS)
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
            cwd=where)  # fmt: skip
    return InternalCA(where / "ca.pem", where / "server.pem", where / "server.key")


def client_certificate(ca: InternalCA, name: str) -> tuple[str, str]:
    """A TLS client certificate with CN `name`, signed by the CA: (cert PEM, key PEM)."""
    where = ca.ca.parent
    openssl("req", *EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
            cwd=where)  # fmt: skip
    (where / "client.ext").write_text(CLIENT_EXTENSIONS)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", "client.ext",
            cwd=where)  # fmt: skip
    return (where / f"{name}.pem").read_text(), (where / f"{name}.key").read_text()


def server_context(tls: tuple[Path, Path], client_ca: Path | None = None) -> ssl.SSLContext:
    """A test server's TLS context: its (certificate, key); with `client_ca`, only
    clients with a certificate that CA signed are served (mutual TLS)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*tls)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(client_ca))
    return context
