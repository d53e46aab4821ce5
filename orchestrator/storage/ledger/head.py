"""The head file (``ledger.head``): what catches a truncated ledger.

``{"entry_hash": ..., "seq": N}`` (plus ``"hmac"`` over those two when keyed), replaced
atomically after each append. The chain alone cannot tell a file cut after row 6 from a
ledger that only ever had 6 rows; the head file can. Rows reach the disk (fsync) before the
head moves, so after a crash the file may be one row ahead of the head, never behind;
``verify`` accepts exactly that.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.ledger.encoding import (
    LEDGER_KEY_ENV,
    LedgerError,
    canonical,
    head_mac,
    is_hex64,
)


@dataclass(frozen=True)
class Head:
    seq: int
    entry_hash: str
    mac: str | None

    def mac_problem(self, key: bytes | None) -> str | None:
        """Why this head's keying does not match ``key``, or None."""
        if key is None:
            if self.mac is not None:
                return (
                    f"the ledger is keyed (its head file carries an HMAC): set ${LEDGER_KEY_ENV} "
                    "to use it"
                )
            return None
        if self.mac is None:
            return "the head file has no HMAC but a key was given: rewritten without the key?"
        if not hmac.compare_digest(self.mac, head_mac(key, self.seq, self.entry_hash)):
            return "the head file's HMAC does not match: rewritten without the key (or another key)"
        return None


def read_head(path: Path) -> Head | None:
    """The head file at ``path``; None when there is none."""
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LedgerError(f"ledger error: {path}: unreadable head file: {exc}") from None
    if (
        not isinstance(raw, dict)
        or not {"seq", "entry_hash"} <= raw.keys() <= {"seq", "entry_hash", "hmac"}
        or type(raw["seq"]) is not int
        or raw["seq"] < 1
        or not is_hex64(raw["entry_hash"])
        or not (raw.get("hmac") is None or is_hex64(raw["hmac"]))
    ):
        raise LedgerError(f"ledger error: {path}: unreadable head file: bad fields")
    return Head(raw["seq"], raw["entry_hash"], raw.get("hmac"))


def write_head(path: Path, seq: int, entry_hash: str, key: bytes | None) -> None:
    """Replace the head file, atomically: it now vouches for rows 1..``seq``."""
    head: dict[str, Any] = {"entry_hash": entry_hash, "seq": seq}
    if key is not None:
        head["hmac"] = head_mac(key, seq, entry_hash)
    atomic_write(path, canonical(head) + b"\n")
