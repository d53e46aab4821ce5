"""The fleet's signing key for the tests (issue 40): made once per test process (RSA takes
a moment) by the code ``orchestrator fleet keygen`` runs, then written where a config
expects it, mode 0600, as the command leaves it."""

from __future__ import annotations

import base64
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from orchestrator.app.fleet_key import FleetKey, generate_fleet_key

_MADE: dict[str, tuple[bytes, bytes]] = {}


def fleet_key_bytes(name: str = "fleet") -> tuple[bytes, bytes]:
    """(private key, certificate) PEM bytes; one pair per ``name`` per process."""
    if name not in _MADE:
        with tempfile.TemporaryDirectory() as scratch:
            made = FleetKey(Path(scratch) / "fleet.key", Path(scratch) / "fleet.crt")
            generate_fleet_key(made, bits=2048)
            _MADE[name] = (made.key.read_bytes(), made.certificate.read_bytes())
    return _MADE[name]


def install_fleet_key(config_dir: Path, name: str = "fleet") -> FleetKey:
    """The pair ``name`` as ``config_dir/fleet.key`` and ``fleet.crt`` (the defaults),
    replacing what is there."""
    key, certificate = fleet_key_bytes(name)
    fleet = FleetKey(config_dir / "fleet.key", config_dir / "fleet.crt")
    for path, data in ((fleet.key, key), (fleet.certificate, certificate)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    return fleet


def signed_body(message: str | bytes) -> Any:
    """The task body (``[args, kwargs, embed]``) of a message as kombu's Redis transport
    keeps it, read through its signature's envelope (Celery's ``auth`` serializer: the
    base64 of signer, signature, content type, encoding and body, joined by
    ``\\x00\\x01``). Read only: the signature is the worker's to check."""
    envelope = json.loads(message)
    assert envelope["content-type"] == "application/data", envelope["content-type"]
    signed = base64.b64decode(base64.b64decode(envelope["body"]))
    return json.loads(signed.split(b"\x00\x01", 4)[4])
