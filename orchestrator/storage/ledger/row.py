"""A ledger row as a writer gives it (``LedgerRow``): the one spelling of a row's fields,
validated when made, for every ledger backend (``DecisionLedger``) and every writer.

The ledger adds the rest when it appends: ``seq``, ``prev_hash`` and ``entry_hash``, and
the time (``ts``) when the row has none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import Field, StrictStr, field_validator, model_validator

from orchestrator.domain.validation import Frozen
from orchestrator.storage.ledger.encoding import canonical, inputs_hash

Hex64 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
# What an outcome row copies from the decision row it supersedes.
_CARRIED = (
    "decision_id",
    "ticket",
    "run",
    "capability",
    "inputs_hash",
    "model_version",
    "prompt_version",
    "source",
    "decision",
    "confidence",
    "routing",
)


class LedgerRow(Frozen):
    """One row as a writer gives it: every field but what the ledger adds when it appends
    (``seq``, ``prev_hash``, ``entry_hash``; and ``ts`` when it is None). Validated when
    made, so a malformed row never reaches the ledger's lock."""

    # ``playbook``: an event of a playbook entry (proposed, agreed, promoted, retired; issue
    # 44), keyed ``playbook:<entry>:<event>:<revision>``: provenance, never a decision's
    # outcome, so the history (``index.py``) does not count it.
    kind: Literal["decision", "outcome", "trace", "playbook"]
    decision_id: Annotated[StrictStr, Field(min_length=1)]
    ticket: StrictStr
    run: StrictStr
    capability: StrictStr
    inputs_hash: Hex64  # a sha256 of the inputs: which inputs, never the payload
    # None where there is nothing to name: a playbook or synthetic verdict has no model.
    model_version: StrictStr | None
    prompt_version: StrictStr | None
    source: StrictStr
    decision: dict[StrictStr, Any]
    confidence: float | None = None
    routing: StrictStr | None = None
    outcome: StrictStr | None = None
    supersedes: Hex64 | None = None  # the entry_hash of the decision row an outcome is of
    ts: StrictStr | None = None  # ISO-8601 in UTC; None: when it is appended

    @model_validator(mode="before")
    @classmethod
    def _no_other_fields(cls, data: Any) -> Any:
        # A field the row does not have (``seq``, say: the ledger's to number) is a bug in
        # the calling code, like an unknown keyword argument, not a bad value: TypeError.
        if isinstance(data, Mapping):
            unknown = sorted(str(name) for name in data if name not in cls.model_fields)
            if unknown:
                raise TypeError(f"LedgerRow: no such field: {', '.join(unknown)}")
        return data

    @field_validator("confidence", mode="before")
    @classmethod
    def _a_finite_number(cls, value: object) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number or None, got {value!r}")
        try:
            number = float(value)
        except OverflowError:  # an int beyond float range
            raise ValueError(f"{value} is out of range") from None
        if not math.isfinite(number):
            raise ValueError(f"not JSON: {number!r} (JSON has no NaN or Infinity)")
        return number

    @field_validator("ts")
    @classmethod
    def _in_utc(cls, ts: str | None) -> str | None:
        if ts is not None:
            _check_ts(ts)
        return ts

    @model_validator(mode="after")
    def _storable(self) -> LedgerRow:
        if self.kind == "outcome" and (self.outcome is None or self.supersedes is None):
            raise ValueError("an outcome row needs `outcome` and `supersedes` (its decision row)")
        canonical(self.content(""))  # what JSON would not give back fails here
        return self

    @classmethod
    def outcome_of(
        cls, decision_row: Mapping[str, Any], outcome: str, *, ts: str | None = None
    ) -> LedgerRow:
        """What happened to a decision, as a new row superseding its row (read from the
        ledger, with its ``entry_hash``): the decision row itself is never touched."""
        carried = {name: decision_row[name] for name in _CARRIED}
        return cls(
            kind="outcome",
            **carried,
            outcome=outcome,
            supersedes=decision_row["entry_hash"],
            ts=ts,
        )

    def content(self, ts: str) -> dict[str, Any]:
        """The fields hashed and stored (all but seq, prev_hash, entry_hash), at ``ts``."""
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        fields["decision"] = dict(self.decision)
        fields["ts"] = ts
        return fields


def utc_now() -> str:
    """The time a row without one is appended at, as the ledger writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _check_ts(ts: str) -> None:
    try:
        parsed = datetime.fromisoformat(ts)
    except ValueError:
        raise ValueError(f"ts: not an ISO-8601 timestamp: {ts!r}") from None
    offset = parsed.utcoffset()
    if offset is None or offset.total_seconds() != 0:
        raise ValueError(f"ts: not in UTC: {ts!r}")


def person_decision(
    *,
    decision_id: str,
    ticket: str,
    run: str,
    capability: str,
    inputs: object,
    decision: dict[str, Any],
    at: datetime,
) -> LedgerRow:
    """The row of a decision a person made (a resume, a budget reset, an answer given in
    an issue comment): no model and no prompt, the inputs recorded by their hash."""
    return LedgerRow(
        kind="decision",
        decision_id=decision_id,
        ticket=ticket,
        run=run,
        capability=capability,
        inputs_hash=inputs_hash(inputs),
        model_version=None,
        prompt_version=None,
        source="human",
        decision=decision,
        ts=at.isoformat(),
    )
