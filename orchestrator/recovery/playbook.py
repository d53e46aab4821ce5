"""Known failures with known repairs, consulted before any model is asked (issue 44: the
playbook is files, ``domain.playbook``, learned from decisions that proved right).

``Playbook`` indexes the promoted entries: a signature entry by its key (one dict look-up,
whatever the number of entries), a pattern entry by its check. ``match`` returns the one
that decides a failure as plain data (``PlaybookMatch``), which the decision's inputs keep
so replay decides the same; it costs no model call and goes through exactly the same
validation and execution as a model's verdict: the table can propose, never bypass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.domain.config import ContextLimits
from orchestrator.domain.failure_signature import FailureSignature
from orchestrator.domain.playbook import EntryStatus, PlaybookEntry, PlaybookMatch, parse_entry
from orchestrator.domain.proposals import Failure
from orchestrator.reading.long_log import root_cause_regions
from orchestrator.recovery.context import tail_bytes
from orchestrator.redaction import redact
from orchestrator.starter import builtin_playbook_texts

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _filled(value: Any, groups: Mapping[str, str]) -> Any:
    """``value`` (a decision's JSON) with ``{name}`` placeholders of the pattern's named
    groups filled in; a filled value loses its single quotes, so a template's quoting holds
    whatever the check printed. Other braces are left alone."""
    if isinstance(value, str):
        return _PLACEHOLDER.sub(
            lambda m: groups[m.group(1)].replace("'", "") if m.group(1) in groups else m.group(0),
            value,
        )
    if isinstance(value, list):
        return [_filled(v, groups) for v in value]
    if isinstance(value, dict):
        return {k: _filled(v, groups) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Playbook:
    """The promoted entries, indexed. Built once per process or decision; pure lookups."""

    by_key: Mapping[str, PlaybookEntry] = field(default_factory=dict)
    by_check: Mapping[str, tuple[tuple[PlaybookEntry, re.Pattern[str]], ...]] = field(
        default_factory=dict
    )

    @classmethod
    def of(cls, entries: Iterable[PlaybookEntry]) -> Playbook:
        """Index ``entries``: only promoted ones decide. Two promoted entries with the same
        signature: the first (in the order given) decides."""
        by_key: dict[str, PlaybookEntry] = {}
        by_check: dict[str, list[tuple[PlaybookEntry, re.Pattern[str]]]] = {}
        for entry in entries:
            if entry.status is not EntryStatus.PROMOTED:
                continue
            key = entry.match.signature_key()
            if key is not None:
                by_key.setdefault(key, entry)
            elif entry.match.pattern is not None and entry.match.check is not None:
                compiled = re.compile(entry.match.pattern, re.MULTILINE)
                by_check.setdefault(entry.match.check, []).append((entry, compiled))
        return cls(by_key, {c: tuple(found) for c, found in by_check.items()})

    def __len__(self) -> int:
        return len(self.by_key) + sum(len(found) for found in self.by_check.values())

    def match(
        self, failure: Failure, signature: FailureSignature | None, *, stage: str | None = None
    ) -> PlaybookMatch | None:
        """The promoted entry that decides this failure, or None: a signature entry whose
        key is the failure's (never for a signature with no deciding line), else the first
        pattern entry of the failing check whose pattern matches its output (the tail, then
        the region further up)."""
        if signature is not None and not signature.empty:
            entry = self.by_key.get(signature.key)
            if entry is not None:
                return PlaybookMatch(entry=entry.id, decision=dict(entry.decision), learned=True)
        if failure.check is None:
            return None
        for entry, pattern in self.by_check.get(failure.check, ()):
            if entry.match.stage is not None and stage is not None and entry.match.stage != stage:
                continue
            for text in (failure.output, failure.output_further_up):
                found = pattern.search(text) if text else None
                if found:
                    groups = {k: v for k, v in found.groupdict().items() if v is not None}
                    return PlaybookMatch(
                        entry=entry.id, decision=_filled(entry.decision, groups), learned=False
                    )
        return None


def builtin_entries() -> tuple[PlaybookEntry, ...]:
    """The entries shipped with orchestrator (``starter/playbook/``)."""
    return tuple(
        parse_entry(text, f"orchestrator/starter/playbook/{name}")
        for name, text in builtin_playbook_texts()
    )


def builtin_playbook() -> Playbook:
    return Playbook.of(builtin_entries())


def check_output_of(log_path: Path, limits: ContextLimits) -> tuple[str, str | None]:
    """What the playbook reads of a failed check's log, redacted: its tail, and when the log
    is longer than that, the region around its lowest root-cause line (None otherwise, or
    when the log has none or cannot be read)."""
    tail = tail_bytes(log_path, limits.max_check_output_bytes)
    if not tail.truncated:
        return tail.text, None
    try:
        region = next(root_cause_regions(log_path, limits.evidence_scan_bytes), None)
    except OSError:
        region = None
    return tail.text, redact(region) if region is not None else None
