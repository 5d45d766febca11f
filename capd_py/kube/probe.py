"""Network probes controllers need but must not do themselves (no raw sockets in controllers/)."""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Protocol

from cryptography import x509


def serving_cert_not_after_blocking(host: str, port: int, timeout: float = 3.0) -> str | None:
    """notAfter (RFC3339) of the certificate a TLS server presents, or None if unreachable. The
    certificate is not verified: this reads a date, it does not trust anything."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                ctx.wrap_socket(raw, server_hostname=host) as tls:
            der = tls.getpeercert(binary_form=True)
    except OSError:
        return None
    if not der:
        return None
    cert = x509.load_der_x509_certificate(der)
    return cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")


class CertProbe(Protocol):
    """What `Ctx.probe` holds."""

    async def serving_cert_not_after(self, host: str, port: int, timeout: float = 3.0) -> str | None: ...


class TLSProbe:
    """The real `CertProbe`: a TLS handshake from a worker thread."""

    async def serving_cert_not_after(self, host: str, port: int, timeout: float = 3.0) -> str | None:
        return await asyncio.to_thread(serving_cert_not_after_blocking, host, port, timeout)
