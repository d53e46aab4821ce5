"""Telling people what a run came to (issue 28): each ``[[notify]]`` target is sent each
run event it asks for once — a webhook (generic JSON, Slack, Teams) by a plain POST, an
e-mail by SMTP. No new dependency: ``urllib`` and ``smtplib`` do it.

Never blocking or failing a run: every send is bounded (``timeout_s`` per try, in all:
resolving, connecting, sending and the answer; ``TRIES`` tries, ``BACK_OFF_S`` between
them), and nothing raises out of ``after_run`` or ``catch_up`` — a failure is one line said
and an outbox entry. Worst case per target and event: ``TRIES * timeout_s +
sum(BACK_OFF_S)`` (16.5 s at the default 5 s). How a send is made — the address checked
before it is connected to, no redirect followed — is ``app/notify_transport.py``.

Once per run and event: the send comes first, its outbox entry after
(``storage/notify_outbox.py``), so a crash in between sends again rather than never.

A URL is a secret: it is read from its variable only to be used, never said — every
error's text has it replaced by ``$VAR`` and is redacted before it is said or written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import Final, Protocol
from urllib.parse import urlsplit

from orchestrator.app.notify_transport import Refused, post_json, smtp_send
from orchestrator.domain.errors import TicketLocked
from orchestrator.domain.inert import plain
from orchestrator.domain.notices import (
    Occasion,
    body_for,
    headline,
    notice_lines,
    notice_of,
    occasion_of,
)
from orchestrator.domain.notify import NotifyTarget
from orchestrator.domain.runs import RunRecord, utcnow
from orchestrator.execution.stoppable_sleep import stoppable_sleep
from orchestrator.redaction import redact
from orchestrator.storage import OutboxEntry
from orchestrator.storage.notify_outbox import NotifyOutbox

TRIES: Final = 3
BACK_OFF_S: Final = (0.5, 1.0)  # before the second try, before the third
# How far back a batch's catch-up looks for runs whose notices did not go out.
CATCH_UP_WINDOW: Final = timedelta(hours=24)


class Unsent(Exception):
    """One try did not deliver; ``retry`` says whether another may."""

    def __init__(self, why: str, *, retry: bool = True) -> None:
        super().__init__(why)
        self.retry = retry


# (url, JSON body, target) → the HTTP status, within the target's ``timeout_s``; raises
# Refused (an address it may not be sent to), OSError (TimeoutError) when there is no answer.
Post = Callable[[str, bytes, NotifyTarget], int]
# (target, message, environ) → None; raises Refused, OSError (smtplib.SMTPException is one).
Mail = Callable[[NotifyTarget, EmailMessage, Mapping[str, str]], None]


class Notifier(Protocol):
    def after_run(self, record: RunRecord) -> None: ...

    def catch_up(self) -> None: ...

    def saying(self, say: Callable[[str], None]) -> Notifier: ...


class NoNotifier:
    """No ``[[notify]]`` targets: nothing is sent, nothing recorded."""

    def after_run(self, record: RunRecord) -> None:
        return None

    def catch_up(self) -> None:
        return None

    def saying(self, say: Callable[[str], None]) -> Notifier:
        return self


@dataclass(frozen=True)
class Notify:
    """The configured targets, the outbox, and the seams a test swaps."""

    targets: tuple[NotifyTarget, ...]
    outbox: NotifyOutbox
    environ: Mapping[str, str]
    say: Callable[[str], None]
    # Held around a catch-up's send: a ticket being driven is notified by its driver.
    lock: Callable[[str], AbstractContextManager[None]]
    clock: Callable[[], datetime] = utcnow
    sleep: Callable[[float], None] = stoppable_sleep  # a stop is not held up by a retry's wait
    post: Post = post_json
    mail: Mail = smtp_send
    tries: int = TRIES
    back_off_s: tuple[float, ...] = field(default=BACK_OFF_S)

    def saying(self, say: Callable[[str], None]) -> Notifier:
        return replace(self, say=say)

    def after_run(self, record: RunRecord) -> None:
        """Send each target the run's event if it asks for it and has not had it yet."""
        try:
            occasion = occasion_of(record)
            if occasion is None:
                return
            for index, target in enumerate(self.targets):
                if occasion.event in target.events:
                    self._deliver(record, occasion, index, target)
        except Exception as exc:  # noqa: BLE001 - a notice never fails a run
            self.say(f"notify: not sent: {type(exc).__name__}: {self._scrub(str(exc))}")

    def catch_up(self) -> None:
        """Send what an earlier process did not (it died between a run's end and its
        notice, or every try failed): the runs of the last ``CATCH_UP_WINDOW``, each
        under its ticket's lock, skipped while another process holds it."""
        try:
            since = (self.clock() - CATCH_UP_WINDOW).timestamp()
            for record in self.outbox.recent_runs(since):
                if occasion_of(record) is None:
                    continue
                try:
                    with self.lock(record.ticket_id):
                        self.after_run(record)
                except TicketLocked:
                    continue
        except Exception as exc:  # noqa: BLE001 - a notice never fails a batch
            self.say(f"notify: catch-up stopped: {type(exc).__name__}: {self._scrub(str(exc))}")

    def _deliver(
        self, record: RunRecord, occasion: Occasion, index: int, target: NotifyTarget
    ) -> None:
        key = (record.run_id, occasion.event.value, occasion.number, index)
        before = self.outbox.read(*key)
        if before is not None and before.settled:
            return
        tries, waits, error = 0, [], None
        for tries in range(1, self.tries + 1):
            try:
                self._send_once(record, occasion, target)
                error = None
                break
            except Unsent as unsent:
                error = str(unsent)
                if not unsent.retry or tries == self.tries:
                    break
                wait = self.back_off_s[min(tries - 1, len(self.back_off_s) - 1)]
                waits.append(wait)
                self.sleep(wait)
        entry = OutboxEntry(
            run_id=record.run_id,
            event=occasion.event.value,
            number=occasion.number,
            target=index,
            target_name=target.name,
            status="sent" if error is None else "failed",
            tries=(before.tries if before else 0) + tries,
            passes=(before.passes if before else 0) + 1,
            at=self.clock(),
            error=error,
            back_off_s=tuple(waits),
        )
        self.outbox.write(entry)
        if error is not None:
            self.say(
                f"notify: {occasion.event.value} of {record.run_id} not sent to "
                f"{target.name} after {tries} tr{'y' if tries == 1 else 'ies'}: {error}"
            )

    def _send_once(self, record: RunRecord, occasion: Occasion, target: NotifyTarget) -> None:
        notice = notice_of(record, occasion)
        if target.kind == "email":
            self._mail(target, notice)
            return
        env = target.url_env or ""
        url = self.environ.get(env, "")
        if urlsplit(url).scheme not in ("http", "https"):
            raise Unsent(f"${env} is not set to an http(s) URL", retry=False)
        body = body_for(target.kind, notice)
        try:
            status = self.post(url, body, target)
        except Refused as exc:
            raise Unsent(self._scrub(f"${env}: {exc}", url, env), retry=False) from None
        except (OSError, ValueError) as exc:
            raise Unsent(self._scrub(f"{type(exc).__name__}: {exc}", url, env)) from None
        if 200 <= status < 300:
            return
        if 300 <= status < 400:
            # A redirect is not followed (it could point anywhere, an internal address
            # included); it will redirect again.
            raise Unsent(f"${env} answered HTTP {status}, a redirect: not followed", retry=False)
        # A refusal (404, 403: a wrong or revoked URL) will refuse again; a server error or
        # a rate limit may not.
        raise Unsent(f"${env} answered HTTP {status}", retry=status >= 500 or status == 429)

    def _mail(self, target: NotifyTarget, notice: dict[str, object]) -> None:
        message = EmailMessage()
        message["Subject"] = headline(notice)
        message["From"] = target.from_ or ""
        message["To"] = ", ".join(target.to)
        # Plain text only, no HTML part: nothing in it renders (``_text`` made it plain).
        message.set_content(plain("\n".join(notice_lines(notice))) + "\n")
        try:
            self.mail(target, message, self.environ)
        except Refused as exc:
            raise Unsent(self._scrub(f"{target.smtp_host}: {exc}"), retry=False) from None
        except OSError as exc:
            secrets = [self.environ.get(n or "", "") for n in (target.password_env,)]
            raise Unsent(self._scrub(f"{type(exc).__name__}: {exc}", *secrets)) from None

    def _scrub(self, text: str, *secrets: str) -> str:
        """``text`` without any configured URL (``$VAR`` in its place) nor ``secrets``,
        redacted, on one line."""
        for target in self.targets:
            if target.url_env and self.environ.get(target.url_env):
                text = _without(text, self.environ[target.url_env], f"${target.url_env}")
        for secret in secrets:
            if secret:
                text = text.replace(secret, "[REDACTED]")
        return redact(" ".join(text.split()))[:500]


def _without(text: str, url: str, name: str) -> str:
    """``text`` with ``url``, and the parts of it that carry its secret (its path and
    query, where Slack and Teams put their tokens), replaced by ``name``."""
    text = text.replace(url, name)
    parts = urlsplit(url)
    for part in (parts.path + (f"?{parts.query}" if parts.query else ""), parts.query):
        if len(part) > 1:
            text = text.replace(part, name)
    return text


def notifier_for(
    targets: tuple[NotifyTarget, ...],
    outbox: NotifyOutbox,
    environ: Mapping[str, str],
    say: Callable[[str], None],
    lock: Callable[[str], AbstractContextManager[None]],
) -> Notifier:
    """The real notifier for ``targets``, or one that does nothing when there are none."""
    if not targets:
        return NoNotifier()
    return Notify(targets=targets, outbox=outbox, environ=environ, say=say, lock=lock)
