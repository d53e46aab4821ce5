"""A lease kept alive: ``renew`` called every ``interval_s`` on a daemon thread until the
block ends or the lease is found lost. One loop for both fleets' claims (the Redis one's
``coordination.Heartbeat``, PostgreSQL's ``claim.PostgresClaim``).

A renewal that cannot reach the store (``unreachable``: a restart, a cut network) is
tried again at the next beat and remembered in ``last_error``: the lease may still be
good, and if it ran out and someone took the ticket, the fenced writes refuse this
worker (that is the safety, not the heartbeat). A renewal that answers False (another
holder's now) sets ``lost`` and ends the loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

# What a beat heard: True renewed, False lost to another holder, None unreachable.
BeatOutcome = bool | None


class Heartbeat:
    """``renew`` on a daemon thread every ``interval_s`` (an Event's wait, not a sleep:
    stopping wakes it at once). ``renewals`` counts those that kept the lease;
    ``_on_beat`` hears each beat's outcome, after it is recorded."""

    def __init__(
        self,
        renew: Callable[[], bool],
        *,
        unreachable: type[Exception],
        interval_s: float,
        name: str,
        _on_beat: Callable[[BeatOutcome], None] | None = None,
    ) -> None:
        self.interval_s = interval_s
        self.lost = threading.Event()
        self.last_error: str | None = None
        self.renewals = 0
        self._renew = renew
        self._unreachable = unreachable
        self._on_beat = _on_beat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat_until_stopped, name=name, daemon=True)

    def beat(self) -> BeatOutcome:
        """Renew once, now: True renewed, False lost (``lost`` set), None unreachable."""
        if self.lost.is_set():
            outcome: BeatOutcome = False
        else:
            try:
                held = self._renew()
            except self._unreachable as exc:
                self.last_error = str(exc)
                outcome = None
            else:
                self.last_error = None
                if held:
                    self.renewals += 1
                else:
                    self.lost.set()
                outcome = held
        if self._on_beat is not None:
            self._on_beat(outcome)
        return outcome

    def _beat_until_stopped(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self.beat() is False:
                return

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def __enter__(self) -> Heartbeat:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
