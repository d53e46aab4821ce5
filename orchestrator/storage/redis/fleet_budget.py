"""One batch's budget shared by a whole fleet: one atomic check-and-charge in Redis.

A charge of ``amount`` is counted only if ``spent + amount <= cap`` (0 = no cap), in one
Lua script, so workers on any number of machines never overspend it together: there is
no read-then-write window between them. Each charge has a key (the decision and call it
pays for); a redelivered task that charges the same key again gets the first answer and
is not counted twice. A refused charge is not recorded, so a later retry of it (after a
new batch raised the cap, say) is judged afresh.

Amounts are whole units of one meter (model calls; tokens; micro-dollars for a cost), one
``FleetBudget`` per meter. ``FleetBatchBudget`` is the ``[batch]`` budget (calls, tokens
and cost together) on the same principle, in the local batch budget's shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.domain.config import BatchConfig, PriceConfig
from orchestrator.storage.batch_budget import SharedBudget, Spend, estimate_cost, over_cap
from orchestrator.storage.redis.client import CoordinationStore

if TYPE_CHECKING:
    from orchestrator.storage.open import StateStorage

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


# The batch's three meters in one hash; a call is reserved only while every capped meter
# is under its cap (the local batch budget's rule, ``over_cap``), in one script.
_RESERVE = """
if ARGV[1] ~= '' and redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  return 1
end
local spend = redis.call('HMGET', KEYS[1], 'calls', 'input_tokens', 'output_tokens', 'cost_micros')
local calls = tonumber(spend[1] or '0')
local tokens = tonumber(spend[2] or '0') + tonumber(spend[3] or '0')
local cost = tonumber(spend[4] or '0')
local max_calls, max_tokens, max_cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if (max_calls > 0 and calls >= max_calls) or (max_tokens > 0 and tokens >= max_tokens)
   or (max_cost > 0 and cost >= max_cost) then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'calls', 1)
if ARGV[1] ~= '' then redis.call('HSET', KEYS[2], ARGV[1], 1) end
if tonumber(ARGV[5]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
return 1
"""

_RECORD = """
if ARGV[1] ~= '' and redis.call('HSETNX', KEYS[2], ARGV[1], 1) == 0 then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'input_tokens', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'output_tokens', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'cost_micros', ARGV[4])
if tonumber(ARGV[5]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
return 1
"""


class FleetBatchBudget:
    """The batch budget of ``[batch]`` (calls, tokens, estimated cost) shared by a fleet:
    the same rules and refusals as the local batch's ``BatchBudget`` (a call is reserved
    before it is made, its tokens and cost added when it returns), with each step one
    Lua script. With a ``key`` (the decision and call), a redelivered reservation or
    record is not counted twice; without one it counts as the local budget does."""

    def __init__(
        self,
        store: CoordinationStore,
        batch_id: str,
        caps: BatchConfig,
        prices: dict[str, PriceConfig],
        *,
        keep_s: float = DEFAULT_KEEP_S,
    ) -> None:
        self.store = store
        self.caps = caps
        self.prices = prices
        self.keep_ms = round(keep_s * 1000)
        self._spend_key = store.key("batch", batch_id, "spend")
        self._reserved_key = store.key("batch", batch_id, "reserved")
        self._recorded_key = store.key("batch", batch_id, "recorded")
        self._reserve = store.script(_RESERVE)
        self._record = store.script(_RECORD)

    def read(self) -> Spend:
        values = self.store.call(
            lambda client: client.hmget(
                self._spend_key, ["calls", "input_tokens", "output_tokens", "cost_micros"]
            )
        )
        calls, inp, out, micros = (int(v) if v is not None else 0 for v in values)
        return Spend(calls, inp, out, micros / 1_000_000)

    def reserve(self, key: str | None = None) -> str | None:
        """Count one call if the budget allows it; otherwise say why not."""
        caps = self.caps
        reserved = self._reserve(
            [self._spend_key, self._reserved_key],
            [
                key or "",
                caps.max_model_calls,
                caps.max_tokens,
                _micros(caps.max_cost_usd),
                self.keep_ms,
            ],
        )
        if int(reserved) == 1:
            return None
        return over_cap(self.read(), caps) or "batch budget spent"

    def record(
        self, model: str, input_tokens: int, output_tokens: int, key: str | None = None
    ) -> None:
        cost = estimate_cost(self.prices, model, input_tokens, output_tokens)
        self._record(
            [self._spend_key, self._recorded_key],
            [key or "", input_tokens, output_tokens, _micros(cost), self.keep_ms],
        )


def fleet_batch_budget(
    storage: StateStorage,
    coordination: CoordinationStore,
    batch_id: str,
    caps: BatchConfig,
    prices: dict[str, PriceConfig],
) -> SharedBudget:
    """The budget a fleet's workers charge for a batch: the storage's own where they share
    it (not Redis's then: a summary once read that and said 0 calls, issue 30), else Redis's."""
    if storage.shared_batch_budget:
        return storage.batch_budget(batch_id, caps, prices)
    return FleetBatchBudget(coordination, batch_id, caps, prices)


def _micros(usd: float) -> int:
    return round(usd * 1_000_000)
