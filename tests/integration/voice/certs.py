"""A throw-away CA and the certificates it signs (server and client), made with `cryptography` for
mosquitto's TLS listener in the tests: PEM files under a directory of the test's."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server: Pair
    client: Pair


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Pair:
    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path = path.with_suffix(".key")
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return Pair(path.with_suffix(".crt"), key_path)


def _issue(ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, common_name: str,
           names: list[x509.GeneralName], usage: x509.ObjectIdentifier) -> tuple[x509.Certificate,
                                                                               ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_certificates(root: Path, server_names: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Certificates:
    """A CA, a server certificate for ``server_names`` (host names or IP addresses) and a client
    certificate, all signed by the CA, valid for a day."""
    root.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    ca_cert = (x509.CertificateBuilder().subject_name(_name("assistant test CA")).issuer_name(_name("assistant test CA"))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                            crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    ca = _write(root / "ca", ca_cert, ca_key).cert
    names: list[x509.GeneralName] = []
    for name in server_names:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            names.append(x509.DNSName(name))
    server = _write(root / "server", *_issue(ca_cert, ca_key, server_names[0], names, ExtendedKeyUsageOID.SERVER_AUTH))
    client = _write(root / "client", *_issue(ca_cert, ca_key, "satellite", [], ExtendedKeyUsageOID.CLIENT_AUTH))
    return Certificates(ca, server, client)
