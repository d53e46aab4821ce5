"""Playbook entries (issue 44): a known failure and the decision that proved right for it,
as a file a team can read, review and share (TOML, one per entry, under the project's
``playbook/`` directory; the built-in ones ship with the package the same way).

An entry matches a failure one of two ways:

* by **signature** (``match.signature``): the failure's deciding lines, masked
  (``domain.failure_signature``), with its stage, check and class; what a learned entry
  holds, proposed by the orchestrator when a decision about that failure proved right;
* by **pattern** (``match.pattern``): a regular expression over the failing check's output,
  whose named groups fill ``{name}`` placeholders in the decision's strings; what a person
  writes (the built-in commit-order entry is one).

Its ``status`` says whether it decides: ``proposed`` (waiting for a person, or for enough
agreeing outcomes), ``promoted`` (decides the next matching failure with no model call,
through the same validation, guardrail and verification as a model's verdict), or
``retired`` (its decision failed verification, or a person retired it). Each proven outcome
that agrees with it adds a line of ``provenance``: which run, which verdict, who approved.
Pure: parsing and rendering text, no I/O.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Final

import tomli_w
from pydantic import Field, StrictInt, StrictStr, field_validator, model_validator

from orchestrator.domain.errors import ConfigError
from orchestrator.domain.failure_signature import MAX_LINES, FailureSignature, SignatureLine
from orchestrator.domain.validation import Frozen, toml_model

ENTRY_ID: Final = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
SUFFIX: Final = ".toml"
# An entry file larger than this is not an entry (a reviewer reads every line of it).
MAX_ENTRY_BYTES: Final = 64 * 1024
EntryId = Annotated[StrictStr, Field(pattern=ENTRY_ID.pattern)]


class EntryStatus(StrEnum):
    PROPOSED = "proposed"
    PROMOTED = "promoted"
    RETIRED = "retired"


class Match(Frozen):
    """What failure the entry is about. ``stage``/``check`` None: any."""

    stage: StrictStr | None = None
    check: StrictStr | None = None
    failure_class: StrictStr = "code"
    signature: Annotated[tuple[SignatureLine, ...], Field(max_length=MAX_LINES)] = ()
    pattern: Annotated[StrictStr, Field(min_length=1, max_length=4096)] | None = None

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value, re.MULTILINE)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_way(self) -> Match:
        if bool(self.signature) == (self.pattern is not None):
            raise ValueError("give exactly one of `signature` (masked lines) or `pattern`")
        if self.pattern is not None and self.check is None:
            raise ValueError("a `pattern` reads a check's output: name the `check`")
        if self.signature and self.stage is None:
            # A signature is of one stage's failure: without it the entry could never match.
            raise ValueError("a `signature` is a stage's failure: name the `stage`")
        return self

    def signature_key(self) -> str | None:
        """The index key of a signature entry (None for a pattern entry): equal to the
        key of the ``FailureSignature`` it matches."""
        if not self.signature or self.stage is None:
            return None
        return FailureSignature(
            stage=self.stage, check=self.check, failure_class=self.failure_class,
            lines=self.signature,
        ).key  # fmt: skip


class Provenance(Frozen):
    """One proven outcome the entry's decision agrees with (or the person who wrote it)."""

    run_id: StrictStr
    ticket_id: StrictStr | None = None
    verdict: StrictInt | None = None  # the run's verdict number
    decision_id: StrictStr | None = None
    source: StrictStr  # who decided: model | infra | playbook | person
    approved_by: StrictStr | None = None  # "auto", or the person who approved it
    outcome: StrictStr  # what proved it: "mechanical-fix green: ...", "review passed"
    at: datetime


class PlaybookEntry(Frozen):
    id: EntryId
    status: EntryStatus = EntryStatus.PROPOSED
    description: Annotated[StrictStr, Field(max_length=2000)] = ""
    match: Match
    # A verdict object (``domain.verdicts``), validated as a model's is when it decides.
    decision: dict[StrictStr, Any]
    provenance: tuple[Provenance, ...] = ()
    promoted_by: StrictStr | None = None
    promoted_at: datetime | None = None
    retired_reason: StrictStr | None = None
    retired_at: datetime | None = None
    # How many times the entry changed (proposed, agreed, promoted, retired): its ledger
    # rows are keyed by it, so an event cut short between its row and its file, and done
    # again, finds its row rather than appending a second one. A hand-written file: 0.
    revision: Annotated[StrictInt, Field(ge=0)] = 0

    @field_validator("decision")
    @classmethod
    def _names_an_action(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(value.get("action"), str):
            raise ValueError("a decision names its `action`")
        return value

    @property
    def agreeing(self) -> int:
        """How many proven outcomes agree with the entry's decision."""
        return len(self.provenance)

    def promoted(self, *, by: str, at: datetime) -> PlaybookEntry:
        return self.revised(status=EntryStatus.PROMOTED, promoted_by=by, promoted_at=at,
                            retired_reason=None, retired_at=None,
                            revision=self.revision + 1)  # fmt: skip

    def retired(self, *, reason: str, at: datetime) -> PlaybookEntry:
        return self.revised(
            status=EntryStatus.RETIRED, retired_reason=reason, retired_at=at,
            revision=self.revision + 1,
        )  # fmt: skip

    def agreed(self, provenance: Provenance) -> PlaybookEntry:
        """One more proven outcome; the same decision of the same run counts once."""
        if any(
            p.run_id == provenance.run_id and p.verdict == provenance.verdict
            for p in self.provenance
        ):
            return self
        return self.revised(provenance=(*self.provenance, provenance), revision=self.revision + 1)


def entry_id_for(signature: FailureSignature, action: str) -> str:
    """The id a learned entry gets: its check (or stage), its action and its key's start,
    so a listing says what it is about and two signatures never share an id."""
    where = re.sub(r"[^a-z0-9-]+", "-", (signature.check or signature.stage).lower()).strip("-")
    return f"{where[:24] or 'stage'}-{action}-{signature.key[:12]}"


def parse_entry(text: str, where: str) -> PlaybookEntry:
    """An entry from its TOML text; ``where`` (the file) names it in errors, with the key.
    Raises ConfigError."""
    if len(text.encode("utf-8")) > MAX_ENTRY_BYTES:
        raise ConfigError(f"{where}: larger than {MAX_ENTRY_BYTES} bytes: not a playbook entry")
    read = toml_model(text, PlaybookEntry, not_toml="not valid TOML")
    if isinstance(read, PlaybookEntry):
        return read
    raise ConfigError(f"{where}: {'; '.join(read)}")


def render_entry(entry: PlaybookEntry) -> str:
    """The entry as its TOML file holds it: the header a reviewer reads first, then what it
    matches, what it decides and where it came from. None values are left out."""
    data = entry.model_dump(mode="json", exclude_none=True)
    # An empty list says nothing a reader needs (no provenance: a person wrote it; no
    # signature: it matches by pattern), and parsing gives it back as the default.
    data = {k: v for k, v in data.items() if v != []}
    data["match"] = {k: v for k, v in data["match"].items() if v != []}
    # A multi-line string reads best, but TOML reads its line ends as "\n": a text with a
    # carriage return in it is written escaped, so it reads back as it was.
    return tomli_w.dumps(data, multiline_strings=not _holds_cr(data))


def _holds_cr(value: object) -> bool:
    if isinstance(value, str):
        return "\r" in value
    if isinstance(value, dict):
        return any(_holds_cr(v) for v in value.values())
    return isinstance(value, list) and any(_holds_cr(v) for v in value)


class PlaybookMatch(Frozen):
    """The entry that decided a failure, as the decision's inputs keep it (so replay decides
    the same without the playbook's files): its id, its decision as filled in for this
    failure, and whether it was learned (a signature entry, retired when it fails
    verification) or written (a pattern entry)."""

    entry: EntryId
    decision: dict[StrictStr, Any]
    learned: bool = True
