"""Mesh certificates minted at test time: a CA, and leaf certificates it signs (EC P-256)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from services.runtime.tls import MeshTls


@dataclass(frozen=True)
class Authority:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return builder.not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(
        now + datetime.timedelta(days=1)
    )


def make_ca(name: str = "agentmesh test CA") -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _validity(x509.CertificateBuilder()).subject_name(_name(name)).issuer_name(_name(name))
    builder = builder.public_key(key.public_key()).serial_number(x509.random_serial_number())
    builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    return Authority(key, builder.sign(key, hashes.SHA256()))


def make_member(ca: Authority, name: str, *, dns: tuple[str, ...] = ("localhost", "mesh.agentmesh.test")) -> MeshTls:
    """A leaf for ``name`` valid for server and client auth, as ``MeshTls``."""
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    builder = _validity(x509.CertificateBuilder()).subject_name(_name(name)).issuer_name(ca.cert.subject)
    builder = builder.public_key(key.public_key()).serial_number(x509.random_serial_number())
    builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return MeshTls(cert.public_bytes(serialization.Encoding.PEM), key_pem, ca.pem)


def write_member(member: MeshTls, folder: Path) -> tuple[Path, Path, Path]:
    """The member's cert, key and CA as files (for --tls-cert, --tls-key, --tls-ca)."""
    paths = (folder / "tls.crt", folder / "tls.key", folder / "ca.crt")
    for path, data in zip(paths, (member.cert_chain, member.private_key, member.root_ca), strict=True):
        path.write_bytes(data)
    return paths
