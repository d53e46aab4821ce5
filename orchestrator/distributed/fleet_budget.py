"""One batch's budget shared by a whole fleet: one atomic check-and-charge in Redis.

A charge of ``amount`` is counted only if ``spent + amount <= cap`` (0 = no cap), in one
Lua script, so workers on any number of machines never overspend it together: there is
no read-then-write window between them. Each charge has a key (the decision and call it
pays for); a redelivered task that charges the same key again gets the first answer and
is not counted twice. A refused charge is not recorded, so a later retry of it (after a
new batch raised the cap, say) is judged afresh.

Amounts are whole units of one meter (model calls; tokens; micro-dollars for a cost), one
``FleetBudget`` per meter.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.distributed.client import CoordinationStore

_CHARGE = """
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  return {1, spent, 1}
end
local amount = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
if cap > 0 and spent + amount > cap then
  return {0, spent, 0}
end
spent = redis.call('INCRBY', KEYS[1], amount)
redis.call('HSET', KEYS[2], ARGV[1], amount)
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return {1, spent, 0}
"""

# A batch's budget outlives the batch long enough for a late redelivery to find its
# charges, then Redis forgets it.
DEFAULT_KEEP_S = 7 * 24 * 3600


@dataclass(frozen=True)
class Charged:
    total: int  # the meter's total after this charge
    duplicate: bool  # the key was charged before: nothing was added now


@dataclass(frozen=True)
class Refused:
    spent: int
    cap: int
    amount: int
    meter: str

    @property
    def reason(self) -> str:
        return f"batch budget spent: {self.spent}/{self.cap} {self.meter} (a charge of {self.amount} was refused)"


class FleetBudget:
    def __init__(
        self,
        store: CoordinationStore,
        batch_id: str,
        meter: str,
        cap: int,
        *,
        keep_s: float = DEFAULT_KEEP_S,
    ) -> None:
        if cap < 0:
            raise ValueError("a cap is 0 (none) or positive")
        self.store = store
        self.meter = meter
        self.cap = cap
        self.keep_ms = round(keep_s * 1000)
        self._total_key = store.key("batch", batch_id, "budget", meter)
        self._charges_key = store.key("batch", batch_id, "charges", meter)
        self._charge = store.script(_CHARGE)

    def charge(self, key: str, amount: int = 1) -> Charged | Refused:
        """Count ``amount`` under ``key`` if it fits under the cap; once per key."""
        if amount < 0:
            raise ValueError("a charge is never negative: budgets are not refunded")
        accepted, total, duplicate = self._charge(
            [self._total_key, self._charges_key], [key, amount, self.cap, self.keep_ms]
        )
        if int(accepted) == 1:
            return Charged(int(total), bool(int(duplicate)))
        return Refused(int(total), self.cap, amount, self.meter)

    def spent(self) -> int:
        total = self.store.call(lambda client: client.get(self._total_key))
        return int(total) if total is not None else 0
