"""Which tickets a batch has queued and no worker has finished: one key per ticket,
``<ns>:ticket:<id>:enqueued``, set only if absent (so a ticket queued and not finished is
never queued twice, however many batches cron starts) and holding the task's id (so a
later batch waits for that task's result instead of queueing another). The task deletes
its own key when it ends; a key whose task was lost expires after the visibility
timeout, when the broker would have handed the message out again anyway."""

from __future__ import annotations

from orchestrator.storage.redis import CoordinationStore

# Compare-and-delete: a task ends only its own entry, never a newer batch's.
_DONE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


# Set-if-absent, or the current holder's task id: one step, so no batch sees a gap. The
# key already holding this call's task id (new for each call) was set by this very call,
# sent again after its answer was lost: the task is still this batch's to send, or it
# would wait for a task nobody queued.
_MARK = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return ''
end
local current = redis.call('GET', KEYS[1]) or ''
if current == ARGV[1] then
  return ''
end
return current
"""


class Enqueued:
    def __init__(self, store: CoordinationStore) -> None:
        self.store = store
        self._done = store.script(_DONE)
        self._mark = store.script(_MARK)

    def _key(self, ticket_id: str) -> str:
        return self.store.key("ticket", ticket_id, "enqueued")

    def mark(self, ticket_id: str, task_id: str, *, keep_s: float) -> str | None:
        """Record ``task_id`` as the ticket's queued task, unless one already is: then
        return that one's id (and record nothing)."""
        keep_ms = max(1, round(keep_s * 1000))
        current = str(self._mark([self._key(ticket_id)], [task_id, keep_ms]))
        return current or None

    def current(self, ticket_id: str) -> str | None:
        value = self.store.call(lambda client: client.get(self._key(ticket_id)))
        return None if value is None else str(value)

    def done(self, ticket_id: str, task_id: str) -> None:
        self._done([self._key(ticket_id)], [task_id])
