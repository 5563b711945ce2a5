"""A TLS-terminating loopback proxy in front of a dev server, which has no TLS of its own.

gRPC is HTTP/2: after the TLS handshake the proxy copies bytes both ways, and
reads the client's side as HTTP/2 frames, decoding each header block with
HPACK, so a test can see what every request carried (the API key arrives as
the `authorization` header. Checked: the key's bytes never appear in the
decrypted stream as such, because the SDK Huffman-encodes header values; only
HPACK decoding shows it).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from dataclasses import dataclass, field
from pathlib import Path

import hpack
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HEADERS, CONTINUATION = 0x1, 0x9
END_HEADERS, PADDED, PRIORITY = 0x4, 0x8, 0x20


@dataclass
class Certificates:
    ca: Path
    certificate: Path
    key: Path


def make_certificates(folder: Path, host: str = "localhost") -> Certificates:
    """A private CA and a server certificate it signs, for `host` and 127.0.0.1."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hitl-agent test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    server = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])).issuer_name(ca_name)
              .public_key(key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
              .add_extension(x509.SubjectAlternativeName([
                  x509.DNSName(host), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
              .sign(ca_key, hashes.SHA256()))
    files = Certificates(folder / "ca.pem", folder / "server.pem", folder / "server-key.pem")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.certificate.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return files


@dataclass
class Connection:
    """One client connection: the header list of every request it made."""

    requests: list[dict[str, str]] = field(default_factory=list)


class HeaderReader:
    """Splits a client's HTTP/2 byte stream into frames and decodes its header blocks."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.buffer = b""
        self.preface_seen = False
        self.block = b""
        self.decoder = hpack.Decoder()

    def feed(self, data: bytes) -> None:
        self.buffer += data
        if not self.preface_seen:
            if len(self.buffer) < len(PREFACE):
                return
            if not self.buffer.startswith(PREFACE):
                raise ValueError("not an HTTP/2 client")
            self.buffer, self.preface_seen = self.buffer[len(PREFACE):], True
        while len(self.buffer) >= 9:
            length = int.from_bytes(self.buffer[:3], "big")
            if len(self.buffer) < 9 + length:
                return
            kind, flags, payload = self.buffer[3], self.buffer[4], self.buffer[9:9 + length]
            self.buffer = self.buffer[9 + length:]
            if kind == HEADERS:
                if flags & PADDED:
                    payload = payload[1:len(payload) - payload[0]]
                if flags & PRIORITY:
                    payload = payload[5:]
                self.block = payload
            elif kind == CONTINUATION:
                self.block += payload
            else:
                continue
            if flags & END_HEADERS:
                self.connection.requests.append(dict(self.decoder.decode(self.block)))
                self.block = b""


class TlsTerminatingProxy:
    def __init__(self, upstream: str, certificates: Certificates) -> None:
        self.upstream_host, _, port = upstream.rpartition(":")
        self.upstream_port = int(port)
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(certificates.certificate, certificates.key)
        self.context.set_alpn_protocols(["h2"])
        self.connections: list[Connection] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.accept, "127.0.0.1", 0, ssl=self.context)
        return self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()

    async def accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        connection = Connection()
        self.connections.append(connection)
        upstream_reader, upstream_writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        headers = HeaderReader(connection)

        async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, inspect: bool) -> None:
            try:
                while data := await reader.read(65536):
                    if inspect:
                        headers.feed(data)
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, ssl.SSLError):
                pass
            finally:
                writer.close()

        try:
            await asyncio.gather(pump(client_reader, upstream_writer, True), pump(upstream_reader, client_writer, False))
        except asyncio.CancelledError:  # the loop is closing under an open connection
            client_writer.close()
            upstream_writer.close()
