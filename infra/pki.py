"""The CA that signs a tenant vCluster's serving certificate (issue 26, B6). No Django, no I/O.

With SSL passthrough the vCluster terminates TLS itself, with a certificate it signs from its "server CA"
(vcluster v0.36.1 pkg/certs: generated at first start into /data/pki and kept in Secret `<release>-certs`). Left
alone it generates that CA itself, and no kubeconfig the platform hands out can carry it. So the platform
generates one CA per tenant, keeps it in OpenBao, and External Secrets seeds the vCluster's certificate Secret
with it before the first start (tenants/isolation/vcluster.py); the kubeconfig carries exactly this CA: a
tenant's kubeconfig trusts its own vClusters and no other.

ECDSA P-256 (vCluster signs its serving keys with elliptic keys too, cert.go:128), CA:TRUE with path length 0
(it signs leaves only), key usage certSign/cRLSign/digitalSignature.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CA_LIFETIME = timedelta(days=3650)
# Before this much lifetime is left the platform issues a new CA (the vCluster must restart to pick it up).
RENEW_BEFORE = timedelta(days=90)


def new_ca(common_name: str, now: datetime, lifetime: timedelta = CA_LIFETIME) -> tuple[str, str]:
    """(certificate PEM, private key PEM) of a new self-signed CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "gpufleet"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))  # clock skew between us and the cluster
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return cert_pem, key_pem


def needs_renewal(cert_pem: str, now: datetime) -> bool:
    """True when the PEM is not a CA certificate or expires within RENEW_BEFORE."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except (ValueError, x509.ExtensionNotFound):
        return True
    return not is_ca or cert.not_valid_after_utc - now <= RENEW_BEFORE
