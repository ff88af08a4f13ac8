"""HTTPS and mutual TLS with certificates made by the test."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import synapsedb
from tests.api.test_http import free_port


def _cert(
    name: str,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    ip: str | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer[0].subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ip:
        b = b.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), critical=False
        )
    return b.sign(issuer[1] if issuer else key, hashes.SHA256()), key


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[str, str]:
    c, k = path.with_suffix(".crt"), path.with_suffix(".key")
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(c), str(k)


@pytest.mark.parametrize("mutual", [False, True])
def test_https_and_mutual_tls(tmp_path: Path, mutual: bool) -> None:
    ca = _cert("test-ca", None, ca=True)
    ca_crt, _ = _write(tmp_path / "ca", *ca)
    srv_crt, srv_key = _write(tmp_path / "server", *_cert("server", ca, ip="127.0.0.1"))
    cli_crt, cli_key = _write(tmp_path / "client", *_cert("agent", ca))
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "synapsedb",
        "serve",
        "--data",
        str(tmp_path / "d"),
        "--port",
        str(port),
        "--tls-cert",
        srv_crt,
        "--tls-key",
        srv_key,
    ]
    if mutual:
        args += ["--tls-client-ca", ca_crt]
    proc = subprocess.Popen(
        args,
        env={**os.environ, "SYNAPSEDB_EMBEDDER": "none"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"https://127.0.0.1:{port}"
    cert = (cli_crt, cli_key) if mutual else None
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with synapsedb.connect(url, verify=ca_crt, cert=cert) as db:
                    db.namespaces()
                break
            except synapsedb.StorageError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        with synapsedb.connect(url, verify=ca_crt, cert=cert) as db:
            mem = db.namespace("secure")
            assert mem.write("u", "over TLS").content == "over TLS"
        with pytest.raises(synapsedb.StorageError), synapsedb.connect(url) as db:  # unknown CA
            db.namespaces()
        with (
            pytest.raises(synapsedb.StorageError),
            synapsedb.connect(f"http://127.0.0.1:{port}") as db,
        ):  # plain HTTP to a TLS port
            db.namespaces()
        if mutual:  # a trusted server, but no client certificate
            with pytest.raises(synapsedb.StorageError), synapsedb.connect(url, verify=ca_crt) as db:
                db.namespace("secure").stats()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
