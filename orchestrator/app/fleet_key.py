"""The fleet's signing key (issue 40): every task message a batch, ``approve`` or a worker's
retry puts on the broker is signed with it, and a worker runs only a message its
certificate verifies. Celery's own message signing does the work (its ``auth`` serializer,
``celery_app.signing_settings``); this module says where the two files are, makes them,
and says what is wrong with them.

    <config dir>/fleet.key   the RSA private key (PEM), mode 0600: who holds it can queue work
    <config dir>/fleet.crt   its self-signed certificate (PEM), mode 0600: the one signer a
                             worker trusts

``[distributed] fleet_key`` / ``fleet_certificate`` name other paths (relative to the
config file's directory). Every machine of the fleet holds the same pair: a worker signs
its own retries. No stage may read them (the sandbox mounts by allow-list, and the stage
environment names no path to them).

``cryptography`` is imported inside the functions that need it: only the fleet needs it.
"""

from __future__ import annotations

import datetime
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.domain.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.domain.config import LoadedConfig

KEYGEN = "orchestrator fleet keygen"
KEY_BITS = 3072
VALID_DAYS = 10 * 365
COMMON_NAME = "orchestrator fleet"


@dataclass(frozen=True)
class FleetKey:
    """Where the fleet's private key and certificate are."""

    key: Path
    certificate: Path


def fleet_key_files(loaded: LoadedConfig) -> FleetKey:
    """The configured paths, relative ones from the config file's directory."""
    here = loaded.path.parent
    distributed = loaded.config.distributed
    return FleetKey(here / distributed.fleet_key, here / distributed.fleet_certificate)


def _private_file_problem(path: Path, what: str) -> str | None:
    try:
        info = path.stat()
    except FileNotFoundError:
        return f"the fleet's {what} {path} does not exist: run `{KEYGEN}`"
    except OSError as exc:
        return f"the fleet's {what} {path} cannot be read: {exc.strerror}"
    if not stat.S_ISREG(info.st_mode):
        return f"the fleet's {what} {path} is not a regular file"
    if info.st_mode & 0o077:
        return (
            f"the fleet's {what} {path} is readable by others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): chmod 600 {path}"
        )
    if info.st_uid != os.getuid():
        return f"the fleet's {what} {path} belongs to another user (uid {info.st_uid})"
    return None


def fleet_key_problem(fleet: FleetKey, *, now: datetime.datetime | None = None) -> str | None:
    """Why the fleet cannot sign or verify with ``fleet``, or None: both files exist, are
    this user's and no one else's (mode 0600), the certificate is the key's and has not
    expired (Celery refuses an expired one)."""
    for path, what in ((fleet.key, "key"), (fleet.certificate, "certificate")):
        problem = _private_file_problem(path, what)
        if problem is not None:
            return problem
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError:
        return "the cryptography package is not installed (pip install 'orchestrator[distributed]')"
    try:
        key = serialization.load_pem_private_key(fleet.key.read_bytes(), password=None)
    except (ValueError, TypeError) as exc:
        return f"the fleet's key {fleet.key} is not an unencrypted PEM private key: {exc}"
    try:
        certificate = x509.load_pem_x509_certificate(fleet.certificate.read_bytes())
    except ValueError as exc:
        return f"the fleet's certificate {fleet.certificate} is not a PEM certificate: {exc}"
    public = certificate.public_key()
    if not isinstance(key, rsa.RSAPrivateKey) or not isinstance(public, rsa.RSAPublicKey):
        return "the fleet's key and certificate must be RSA (Celery's message signing)"
    if key.public_key().public_numbers() != public.public_numbers():
        return f"the certificate {fleet.certificate} is not the key {fleet.key}'s"
    moment = now or datetime.datetime.now(datetime.UTC)
    if moment >= certificate.not_valid_after_utc:
        return (
            f"the fleet's certificate {fleet.certificate} expired on "
            f"{certificate.not_valid_after_utc:%Y-%m-%d}: make a new pair (`{KEYGEN}`) "
            "and copy it to every machine"
        )
    return None


def require_fleet_key(fleet: FleetKey) -> FleetKey:
    """``fleet`` when it can be used; else a ConfigError naming the file and the fix."""
    problem = fleet_key_problem(fleet)
    if problem is not None:
        raise ConfigError(f"config error: {problem}")
    return fleet


def _write_private(path: Path, data: bytes) -> None:
    """Create ``path`` with mode 0600 from the start (never readable by others, not even
    for a moment); an existing file is not replaced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def generate_fleet_key(fleet: FleetKey, *, bits: int = KEY_BITS, days: int = VALID_DAYS) -> None:
    """Make a new private key and its self-signed certificate at ``fleet``'s paths, each
    mode 0600. Refuses (ConfigError) when either exists: a new pair must reach every
    machine of the fleet, which is a person's decision."""
    for path in (fleet.key, fleet.certificate):
        if path.exists() or path.is_symlink():
            raise ConfigError(
                f"{path} already exists: the fleet's key is made once and copied to every "
                "machine; remove both files first to make a new pair"
            )
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, COMMON_NAME)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        # Celery tells a signer by issuer and serial: a random serial per pair.
        .serial_number(int.from_bytes(secrets.token_bytes(16), "big") >> 1)
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .sign(key, hashes.SHA256())
    )
    _write_private(
        fleet.key,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    _write_private(fleet.certificate, certificate.public_bytes(serialization.Encoding.PEM))
