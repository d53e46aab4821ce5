"""A batch waiting for its tasks' results (each ticket's answer) through a Redis that may
restart, and a queued ticket whose message the broker lost. Neither may wedge the batch:

* **Redis unreachable** (restarting, the network dropped): the wait goes on, retrying
  with back-off, for at most ``outage_s`` of continuous outage. Past it,
  ``CoordinationUnavailable`` (exit 75) says so and that the same batch, run again,
  collects the answers: the workers go on meanwhile, and a finished ticket's answer and
  run stay where that batch reads them.
* **A lost message.** kombu's Redis transport takes a message off the queue (BRPOP)
  before it records it as unacknowledged, in a second command from the worker; when the
  worker's connection drops in between (Redis restarting), the message is nowhere and no
  worker will ever run it (celery/kombu#305 and later reports). So every ``check_s`` a
  task no worker runs now (``PENDING``: none started it; ``RETRY``: its retry's message,
  published before that state is stored, waits for a worker or for its countdown) is
  looked for in the queue's lists and among the unacknowledged messages; missing from both at ``LOOKS`` looks in a
  row, it is sent again under the same task id. The looks are ``check_s`` apart because
  the gap between a worker's two commands is milliseconds: one look could fall in it.
  A ticket still runs at most once: the worker claims it under its lease, and a ticket
  whose run is terminal is not run again.
* **No worker running.** A task still in the queue at ``STILL_QUEUED_LOOKS`` looks in a
  row gets one line saying no worker has taken it: the batch goes on waiting (a worker
  may be starting), but not in silence.

The app is built by ``connect`` (``celery_app.py``); Celery's exception types are imported
inside the calls that need them, so the local mode never loads them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from orchestrator.batch.celery.celery_app import BrokerKeys
from orchestrator.storage.redis import CoordinationStore, CoordinationUnavailable

# The states of a task no worker runs now, whose message must be somewhere: PENDING (an
# id Celery knows nothing about yet) and RETRY (a retry's message is published before the
# state is stored, then waits in the queue or with a worker for its countdown).
WAITING_STATES = frozenset({"PENDING", "RETRY"})
# Looks in a row that must miss a pending task's message before it is sent again.
LOOKS = 2
# Looks in a row that find a task still in the queue before the batch says no worker has
# taken it (5 minutes at the default 30 s): a fleet with no worker running waits, but
# not in silence.
STILL_QUEUED_LOOKS = 10
FIRST_PAUSE_S = 0.1
MAX_PAUSE_S = 5.0


@dataclass(frozen=True)
class WaitPolicy:
    """How long a wait bears Redis being unreachable, and how often it looks for a lost
    task (``[distributed]`` in the config)."""

    outage_s: float  # continuous time Redis may stay unreachable
    check_s: float  # how often a task still pending is looked for


def pause_after(failures: int) -> float:
    """The pause before the next try, after ``failures`` failed ones in a row. Pure."""
    return min(FIRST_PAUSE_S * (1 << min(failures, 16)), MAX_PAUSE_S)


def lost_note(task_id: str, policy: WaitPolicy) -> str:
    return (
        f"task {task_id} was neither queued nor with a worker at {LOOKS} looks "
        f"{policy.check_s:g} s apart (the broker lost its message): queued again"
    )


def message_place(store: CoordinationStore, keys: BrokerKeys, task_id: str) -> str | None:
    """Where the task's message is: ``"queued"`` (in a queue list: no worker took it),
    ``"held"`` (delivered to a worker, not acknowledged: running, waiting for its
    countdown, or reserved), or None (nowhere). Its id is a UUID, found as a substring of
    the message's JSON headers."""

    def look(client: Any) -> str | None:
        for queue in keys.queues:
            if any(task_id in raw for raw in client.lrange(queue, 0, -1)):
                return "queued"
        return "held" if any(task_id in raw for raw in client.hvals(keys.unacked)) else None

    place: str | None = store.call(look)
    return place


def still_queued_note(task_id: str, waited_s: float) -> str:
    return (
        f"task {task_id} still waits in the queue after {waited_s:g} s: no worker has taken "
        "it (is an `orchestrator worker` running on this Redis and namespace?)"
    )


def _unreachable(exc: BaseException, connection_errors: tuple[type[BaseException], ...]) -> bool:
    """Whether ``exc`` says Redis could not be reached: it is a connection error, or was
    raised from one. Celery wraps them once its own retries are spent: its result
    consumer in ``RuntimeError`` ("the Celery application must be restarted"), its result
    backend in ``BackendGetMetaError`` ("failed to get meta"), each ``from`` the error."""
    errors = (*connection_errors, CoordinationUnavailable)
    seen: BaseException | None = exc
    for _ in range(8):  # a chain of causes, not a loop
        if seen is None:
            return False
        if isinstance(seen, errors):
            return True
        seen = seen.__cause__
    return False


class TaskResults:
    """The batch's side of the fleet: one Celery app to send tasks and read their
    answers, built again (``connect``) after Redis was unreachable, since Celery's result
    consumer does not come back by itself once its retries are spent."""

    def __init__(
        self,
        connect: Callable[[], Any],
        store: CoordinationStore,
        keys: BrokerKeys,
        policy: WaitPolicy,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._connect = connect
        self.app = connect()
        self.store = store
        self.keys = keys
        self.policy = policy
        self._clock = clock
        self._sleep = sleep

    def send(self, name: str, args: list[str], task_id: str, queue: str) -> None:
        """Queue the task; a broker that cannot be reached (past kombu's own few retries)
        is ``CoordinationUnavailable`` naming it, masked, as every other Redis call. (Celery
        re-exports kombu's ``OperationalError``.)"""
        from celery.exceptions import OperationalError  # type: ignore[import-untyped]

        try:
            self.app.send_task(name, args=args, task_id=task_id, queue=queue)
        except Exception as exc:
            if not isinstance(exc, OperationalError) and not self._unreachable(exc):
                raise
            raise self.store.unavailable(self._reason(exc)) from None

    def _unreachable(self, exc: BaseException) -> bool:
        return _unreachable(exc, tuple(self.app.backend.connection_errors))

    def _reason(self, exc: BaseException) -> str:
        """What went wrong, in the words of the error under Celery's, URL scrubbed."""
        cause = exc.__cause__ if isinstance(exc, RuntimeError) and exc.__cause__ else exc
        if isinstance(cause, CoordinationUnavailable):
            return cause.reason
        return self.store.url.scrub(str(cause)) or type(cause).__name__

    def task_place(self, task_id: str) -> str:
        """``"started"`` (a worker runs it, or it ended), else where its message is:
        ``"queued"``, ``"held"`` or ``"nowhere"``."""
        if self.app.AsyncResult(task_id).state not in WAITING_STATES:
            return "started"
        return message_place(self.store, self.keys, task_id) or "nowhere"

    def looks_lost(self, task_id: str) -> bool:
        """No worker runs the task and its message is nowhere: lost, if still so at
        the next look ``check_s`` later (one look can fall between a worker's two
        commands)."""
        return self.task_place(task_id) == "nowhere"

    def confirm_lost(self, task_ids: list[str]) -> list[str]:
        """Those of ``task_ids`` lost (``looks_lost``) at ``LOOKS`` looks ``check_s`` apart: for a
        batch that does not wait (``--no-wait``), which otherwise would find a lost task
        "already queued" until its mark expires. Waits only when one looks lost."""
        suspects = list(task_ids)
        for look in range(LOOKS):
            if look and suspects:
                self._sleep(self.policy.check_s)
            suspects = [task_id for task_id in suspects if self.looks_lost(task_id)]
        return suspects

    def _reconnect(self) -> None:
        stale, self.app = self.app, self._connect()
        with suppress(Exception):  # its connections are to a server that went away
            stale.close()

    def wait(
        self,
        task_id: str,
        *,
        resend: Callable[[], object],
        timeout_s: float | None = None,
        said: Callable[[str], None] = lambda _line: None,
    ) -> Any:
        """The task's return value (or its exception, not raised), waiting through outages
        and sending a lost message again. ``timeout_s`` bounds the whole wait (Celery's
        ``TimeoutError`` past it); ``said`` hears one line per message sent again."""
        from celery.exceptions import TimeoutError as NoAnswerYet

        clock, policy = self._clock, self.policy
        deadline = None if timeout_s is None else clock() + timeout_s
        down_since: float | None = None
        failures = missing = queued = 0
        while True:
            wait = policy.check_s if deadline is None else min(policy.check_s, deadline - clock())
            result = self.app.AsyncResult(task_id)
            try:
                try:
                    return result.get(timeout=max(wait, 0.0), propagate=False)
                except NoAnswerYet:
                    if deadline is not None and clock() >= deadline:
                        raise
                seen = self.task_place(task_id)
                missing = missing + 1 if seen == "nowhere" else 0
                queued = queued + 1 if seen == "queued" else 0
                down_since, failures = None, 0
            except Exception as exc:
                if not self._unreachable(exc):
                    raise
                now = clock()
                down_since = now if down_since is None else down_since
                if now - down_since >= policy.outage_s:
                    raise self._gave_up(exc, now - down_since, task_id) from None
                self._sleep(pause_after(failures))
                failures += 1
                self._reconnect()
                continue
            if missing >= LOOKS:
                resend()
                said(lost_note(task_id, policy))
                missing = 0
            if queued == STILL_QUEUED_LOOKS:  # said once, until a worker takes it
                said(still_queued_note(task_id, queued * policy.check_s))

    def _gave_up(self, exc: BaseException, down_s: float, task_id: str) -> CoordinationUnavailable:
        return self.store.unavailable(
            self._reason(exc),
            f" (for {down_s:.0f} s while the batch waited for task {task_id}); the workers go "
            "on: run the same batch again to collect the answers",
        )
