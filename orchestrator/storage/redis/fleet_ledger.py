"""The decision ledger as a fleet writes it: the ledger file on the shared state dir, each
append (and a repair) under the fleet's Redis lock as well as the file's own flock.

The flock keeps the processes of one machine apart; across machines, where a network
filesystem's flock may do nothing, the Redis lock does. A fenced-out worker appends no
decision about the ticket it lost: the fence is checked under the lock, just before the
row is written. Reads take no lock (the file only grows; the ledger's own readers cope
with a row being appended meanwhile).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.storage.redis.fence import NO_FENCE, Fence
from orchestrator.storage.redis.ledger_lock import RedisLock

if TYPE_CHECKING:
    from orchestrator.storage.ledger import (
        ActionHistory,
        LedgerRow,
        RecordedOutcome,
        RepairResult,
        VerifyResult,
    )
    from orchestrator.storage.protocols import DecisionLedger


class FleetLedger:
    def __init__(self, inner: DecisionLedger, lock: RedisLock, fence: Fence = NO_FENCE) -> None:
        self.inner = inner
        self.lock = lock
        self.fence = fence

    def append(self, row: LedgerRow) -> dict[str, Any]:
        with self.lock.held():
            self.fence.check()
            return self.inner.append(row)

    def append_outcome(
        self, decision_row: Mapping[str, Any], outcome: str, *, ts: str | None = None
    ) -> dict[str, Any]:
        with self.lock.held():
            self.fence.check()
            return self.inner.append_outcome(decision_row, outcome, ts=ts)

    def rows(self) -> Iterator[dict[str, Any]]:
        return self.inner.rows()

    def recent(self, n: int) -> list[dict[str, Any]]:
        return self.inner.recent(n)

    def rows_of(self, decision_id: str) -> list[dict[str, Any]]:
        return self.inner.rows_of(decision_id)

    def history(self, signature: str) -> dict[str, ActionHistory]:
        return self.inner.history(signature)

    def recent_outcomes(self, signature: str, last: int) -> dict[str, list[RecordedOutcome]]:
        return self.inner.recent_outcomes(signature, last)

    def verify(self) -> VerifyResult:
        return self.inner.verify()

    def repair(self) -> RepairResult:
        with self.lock.held():
            return self.inner.repair()


if TYPE_CHECKING:

    def _implements_the_protocol(ledger: FleetLedger) -> DecisionLedger:
        """Never called: mypy checks here that the wrapper fits the ledger's protocol."""
        return ledger
