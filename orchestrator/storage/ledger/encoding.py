"""The ledger's bytes: the one serialisation that is hashed and stored, and the hashes.

Row and line
    A row has exactly the fields in ``FIELDS``. Its line in the file is exactly
    ``canonical(row) + b"\\n"``, where ``canonical`` is ``json.dumps`` with sorted keys,
    no whitespace, ``ensure_ascii=False``, UTF-8, and no NaN/Infinity (floats are written
    with ``repr``, so they round-trip). Reading a line and re-serialising it gives the
    same bytes.

Hash construction
    ``entry_hash = SHA-256(prev_hash + canonical(row without entry_hash))`` where
    ``prev_hash`` is the previous row's ``entry_hash`` as 64 ASCII hex characters (64 zeros
    for the first row). With a key (the CLI reads ``$ORCHESTRATOR_LEDGER_KEY``) it is
    ``HMAC-SHA256(key, same bytes)``, so a consistent rewrite of the whole file by someone
    without the key is caught.

    Why it can be checked without re-serialising: keys are sorted, ``entry_hash`` is never
    the first key, so ``canonical(row)`` is ``canonical(row without entry_hash)`` with the
    member ``,"entry_hash":"<hex>"`` spliced in. The verifier takes the stored line, finds
    that member (its value is known from the parsed row; ``rfind``, because the members
    sorting after it hold only strings, integers and nulls, and a ``"`` inside a JSON string
    is always escaped, so no later bytes can look like it) and hashes the line minus that
    member minus the newline: exactly the bytes hashed at append time, with no
    ``json.dumps``. A forged line that makes ``rfind`` land on some other copy of the member
    would need a hash equal to a value inside its own input. Hashing stored bytes (not a
    re-serialisation) also means any byte change, even whitespace, is caught.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from orchestrator.domain import keys
from orchestrator.domain.errors import EXIT_STATE, OrchestratorError

LEDGER_KEY_ENV = keys.LEDGER_KEY_ENV
ZERO_HASH = "0" * 64
# In the order canonical() writes them (sorted).
FIELDS = (
    "capability",
    "confidence",
    "decision",
    "decision_id",
    "entry_hash",
    "inputs_hash",
    "kind",
    "model_version",
    "outcome",
    "prev_hash",
    "prompt_version",
    "routing",
    "run",
    "seq",
    "source",
    "supersedes",
    "ticket",
    "ts",
)
FIELD_SET = frozenset(FIELDS)
_HASH_MEMBER = b',"entry_hash":"'
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEAD_MAC_DOMAIN = b"orchestrator-ledger-head\n"  # a head MAC can never pass as an entry hash


class LedgerError(OrchestratorError):
    """The ledger cannot be appended to, read or repaired as asked."""

    exit_code = EXIT_STATE


def _check_json(value: object) -> None:
    """Refuse what json.dumps would accept but not give back: non-string keys (1 and "1"
    would both become "1"), NaN and infinities, and objects json cannot encode."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not JSON: {value!r} (JSON has no NaN or Infinity)")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"not JSON: object key {k!r} is not a string")
            _check_json(v)
        return
    if isinstance(value, (list, tuple)):
        for v in value:
            _check_json(v)
        return
    raise ValueError(f"not JSON: {type(value).__name__} {value!r:.80}")


def canonical(obj: object) -> bytes:
    """The one serialisation hashed and stored: sorted keys, no whitespace, UTF-8.

    Raises ValueError for NaN/Infinity, non-string keys, text with lone surrogates (not
    encodable as UTF-8) and anything that is not JSON."""
    _check_json(obj)
    text = json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


def inputs_hash(payload: object) -> str:
    """SHA-256 of the canonical bytes: records *which* inputs, without keeping them."""
    return hashlib.sha256(canonical(payload)).hexdigest()


def key_from_env(environ: Mapping[str, str], name: str = LEDGER_KEY_ENV) -> bytes | None:
    """The HMAC key from ``environ[name]``; ``None`` when unset. A set-but-empty variable is
    refused: silently falling back to an unkeyed chain would be a downgrade."""
    value = environ.get(name)
    if value is None:
        return None
    if not value:
        raise LedgerError(f"ledger error: ${name} is set but empty (unset it, or give a key)")
    return value.encode("utf-8")


def digest(key: bytes | None, prev_hash: str, body: bytes) -> str:
    """The entry_hash of a row whose line without it is ``body``."""
    data = prev_hash.encode("ascii") + body
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.digest(key, data, "sha256").hex()


def line_body(line: bytes, entry_hash: str) -> bytes | None:
    """The stored line minus its ``entry_hash`` member and newline: the bytes that were
    hashed. ``None`` if the member is not there (see the module docstring for why rfind)."""
    member = _HASH_MEMBER + entry_hash.encode("ascii") + b'"'
    i = line.rfind(member)
    if i < 0:
        return None
    return line[:i] + line[i + len(member) : -1]


def head_mac(key: bytes, seq: int, entry_hash: str) -> str:
    """The HMAC a keyed ledger's head file carries over its seq and entry_hash."""
    data = _HEAD_MAC_DOMAIN + canonical({"entry_hash": entry_hash, "seq": seq})
    return hmac.digest(key, data, "sha256").hex()


def is_hex64(value: object) -> bool:
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def encode_row(
    fields: Mapping[str, Any], seq: int, prev_hash: str, key: bytes | None
) -> tuple[dict[str, Any], bytes]:
    """Row and line for ``fields`` (every field but seq/prev_hash/entry_hash) at ``seq``."""
    row = dict(fields)
    row["seq"] = seq
    row["prev_hash"] = prev_hash
    body = canonical(row)
    entry_hash = digest(key, prev_hash, body)
    row["entry_hash"] = entry_hash
    line = canonical(row) + b"\n"
    # The verifier recovers `body` by slicing the line; prove it can before writing.
    if line_body(line, entry_hash) != body:
        raise AssertionError("ledger: the entry_hash member cannot be sliced back out")
    stored: dict[str, Any] = json.loads(line)
    return stored, line
