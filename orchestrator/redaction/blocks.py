"""Blocks whose lines are judged together: PEM private keys (secret, however they are cut),
PEM public keys, certificates and PGP messages (kept), the ``data:`` values of a
Kubernetes ``Secret`` manifest (secret, whatever their keys are called), and SOPS
ciphertext (``ENC[...]``: kept, the key that opens it is elsewhere).

Each is found by a linear scan between markers, not by one pattern over the block: the
excerpts we build are cut at arbitrary bytes, so a block may lack either end.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from orchestrator.redaction.placeholders import REDACTED, is_placeholder

# ---- PEM private keys ------------------------------------------------------------------
# Markers only; the block between them is found by a linear scan (``redact_pem``), which
# also handles a block cut at either end — the excerpts we build are cut at arbitrary bytes.
_PEM_MARKER: Final = re.compile(
    r"-----(BEGIN|END)[ ?]?[A-Z0-9 ?]{0,40}PRIVATE[ ?]KEY(?:[ ?]BLOCK)?-----",
)
# Public keys, certificates, and PGP messages and signatures (a message is ciphertext:
# the key that opens it is elsewhere, as with SOPS values): their random-looking lines
# are kept (``public_blocks``).
_PUBLIC_BEGIN: Final = re.compile(
    r"-----BEGIN (?:[A-Z0-9 ]{0,20}PUBLIC KEY(?: BLOCK)?|(?:TRUSTED |X509 )?CERTIFICATE"
    r"(?: REQUEST)?|PGP (?:MESSAGE|SIGNATURE|SIGNED MESSAGE))-----"
)


def redact_pem(text: str) -> str:
    """Replace each private-key block with REDACTED. A BEGIN with no END runs to the end
    of the text (a head cut inside the block); an END with no BEGIN runs from the start of
    the text, or from the previous block (a tail cut inside the block)."""
    if "PRIVATE" not in text:  # the common case costs one substring search
        return text
    spans: list[tuple[int, int]] = []
    open_at: int | None = None
    resume = 0  # where an orphan END's block would have to start
    for marker in _PEM_MARKER.finditer(text):
        if marker.group(1) == "BEGIN":
            if open_at is None:
                open_at = marker.start()
            continue
        spans.append((resume if open_at is None else open_at, marker.end()))
        open_at = None
        resume = marker.end()
    if open_at is not None:
        spans.append((open_at, len(text)))
    return _rewrite_spans(text, spans, lambda block: REDACTED)


# ---- Kubernetes Secret manifests ---------------------------------------------------------
# (each line may carry a diff's marker)
_K8S_SECRET_KIND: Final = re.compile(r"[+\-]?[ \t]*kind:[ \t]*[\"']?[sS]ecret[\"']?[ \t\r]*")
_K8S_DOCUMENT: Final = re.compile(r"[+\-]?---[ \t]*")
_K8S_DATA: Final = re.compile(r"[+\-]?(?P<indent>[ \t]*)(?:data|stringData):[ \t\r]*")
_K8S_ENTRY: Final = re.compile(
    r"(?P<head>[+\-]?(?P<indent>[ \t]*)[A-Za-z0-9_.\-]+:[ \t]+)(?P<value>\S[^\r]*)\r?"
)


def _secret_kind(text: str) -> bool:
    """A line ``kind: Secret`` somewhere: each ``kind:`` (rare in logs) is found by a
    substring search, and only its line is matched."""
    at = text.find("kind:")
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        if _K8S_SECRET_KIND.fullmatch(text, start, end):
            return True
        at = text.find("kind:", end)
    return False


def redact_k8s_secret(text: str) -> str:
    """In a Kubernetes ``Secret`` manifest every value under ``data:``/``stringData:`` is
    a secret (base64 is an encoding, not a protection), whatever its key is called."""
    if "ecret" not in text or not _secret_kind(text):
        return text
    lines = text.split("\n")
    block_indent: int | None = None
    scalar_indent: int | None = None  # inside a ``key: |`` block scalar deeper than this
    in_secret = False
    for number, line in enumerate(lines):
        if number == 0 or _K8S_DOCUMENT.fullmatch(line):
            # each YAML document is judged by its own kind
            end = next(
                (n for n in range(number + 1, len(lines)) if _K8S_DOCUMENT.fullmatch(lines[n])),
                len(lines),
            )
            in_secret = any(_K8S_SECRET_KIND.fullmatch(line) for line in lines[number:end])
            block_indent = None
        if not in_secret:
            continue
        if scalar_indent is not None:
            indent = len(line) - len(line.lstrip(" \t+-"))
            if line.strip() and indent > scalar_indent:
                lines[number] = line[:indent] + REDACTED + line[len(line.rstrip("\r")) :]
                continue
            scalar_indent = None
        data = _K8S_DATA.fullmatch(line)
        if data is not None:
            block_indent = len(data.group("indent"))
            continue
        if block_indent is None:
            continue
        if line.lstrip(" \t+-").startswith("#"):
            continue  # a comment inside the block
        entry = _K8S_ENTRY.fullmatch(line)
        if entry is None or len(entry.group("indent")) <= block_indent:
            block_indent = None if line.strip() else block_indent
            continue
        value = entry.group("value")
        if value.strip() in {"|", ">", "|-", ">-", "|+", ">+"}:
            scalar_indent = len(entry.group("indent"))
            continue
        # (eight base64 characters hold four bytes: no credential)
        if len(value.strip("\"' ")) > 8 and not is_placeholder(value):
            lines[number] = entry.group("head") + REDACTED + line[entry.end("value") :]
    return "\n".join(lines)


def _rewrite_spans(text: str, spans: list[tuple[int, int]], rewrite: Callable[[str], str]) -> str:
    """``text`` with each (ordered, disjoint) span replaced by ``rewrite(span text)``."""
    if not spans:
        return text
    parts: list[str] = []
    position = 0
    for start, end in spans:
        parts.append(text[position:start])
        parts.append(rewrite(text[start:end]))
        position = end
    parts.append(text[position:])
    return "".join(parts)


def public_blocks(text: str) -> list[tuple[int, int]]:
    """Spans of PEM public keys, certificates and PGP messages (BEGIN to END, or to the
    end of a cut text): public by design or ciphertext, and a certificate chain in a TLS
    log is evidence."""
    if "-----BEGIN" not in text:
        return []
    spans: list[tuple[int, int]] = []
    for begin in _PUBLIC_BEGIN.finditer(text):
        if spans and begin.start() < spans[-1][1]:
            continue
        end = text.find("-----END", begin.end())
        spans.append((begin.start(), len(text) if end < 0 else end))
    return spans


def in_sops_value(text: str, start: int) -> bool:
    """``start`` is inside SOPS ciphertext (``ENC[AES256_GCM,data:...,iv:...]``): an
    ``ENC[`` before it on its line that is not closed yet. (One line back, at most 4 KiB:
    a SOPS value fits; a huge line costs no more.)"""
    opened = text.rfind("ENC[", max(0, start - 4096), start)
    return opened >= 0 and text.find("]", opened, start) < 0 and text.find("\n", opened, start) < 0
