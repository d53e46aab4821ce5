"""Scrubbing: secrets (``redact``) and personal data out of a text — e-mail addresses,
phone numbers, payment-card numbers (Luhn-checked, so commit hashes and timestamps are
left alone). What the model said is scrubbed before anything stores it.

A command is run as the model wrote it or not at all: scrubbing one would run something
nobody proposed (``git add [REDACTED]`` is a pathspec matching other files), so a recipe
command the scrubber would rewrite, or that carries a mark it writes, is refused
(``rewrite_refusal``), and the recipe with it.
"""

from __future__ import annotations

import re

from orchestrator.redaction.core import redact
from orchestrator.redaction.held import HeldSecrets
from orchestrator.redaction.placeholders import REDACTED

EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,24}\b")
PHONE = re.compile(r"(?<![\w.])\+?\d{1,3}[ .-]?\(?\d{2,4}\)?[ .-]\d{3,4}[ .-]\d{3,4}(?![\w.])")
CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    return "[CARD]" if 13 <= len(digits) <= 19 and _luhn(digits) else match.group(0)


def scrub(text: str, held: HeldSecrets | None = None) -> tuple[str, int]:
    """Secrets (``redact``, with ``held``) and personal data out of ``text``; returns
    (text, how many were replaced)."""
    count = 0
    cleaned = redact(text, held)
    if cleaned != text:
        count += 1
    cleaned, n = EMAIL.subn("[EMAIL]", cleaned)
    count += n
    # Cards before phones: a card number's groups would otherwise read as a phone number.
    carded = CARD.sub(_card, cleaned)
    count += carded.count("[CARD]") - cleaned.count("[CARD]")
    cleaned, n = PHONE.subn("[PHONE]", carded)
    return cleaned, count + n


# What scrubbing writes in place of what it removed.
SCRUB_MARKS = (REDACTED, "[EMAIL]", "[CARD]", "[PHONE]")


def rewrite_refusal(command: str) -> str | None:
    """Why ``command`` may not run as a recipe command, or None. Refused when the
    scrubber would rewrite it (it holds a secret or personal data: what was scrubbed
    before it was stored would not be what ran), or when it holds a mark the scrubber
    writes (it was rewritten already, or the model copied one from the redacted context:
    either way it is not a command anyone meant). The reason never quotes the text."""
    marks = [mark for mark in SCRUB_MARKS if mark in command]
    if marks:
        return (
            f"holds {', '.join(marks)}, text the output guardrail writes in place of a secret "
            "or personal data: a recipe command runs exactly as proposed or not at all"
        )
    if scrub(command)[0] != command:
        return (
            "holds what the output guardrail scrubs (a secret or personal data): it would be "
            "stored rewritten, and a rewritten command is not run"
        )
    return None
