"""The back-off's sleep ends at a stop however the signal lands (``stoppable_sleep``).

``time.sleep`` wakes only when the signal breaks its own system call: one the OS hands to
another thread, or one that lands just before the call begins, leaves the handler due
and the sleep running to its end (a SIGTERM at an infra back-off once waited out 600 s).
Each case runs in a fresh interpreter, whose main thread sleeps while a second thread
waits, by reading /proc, until it is asleep in the kernel, then signals itself.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import subprocess_env

SLEEPER = textwrap.dedent(
    """
    import signal, sys, threading, time
    from orchestrator.execution.stoppable_sleep import stoppable_sleep

    sleep = {"stoppable": stoppable_sleep, "time": time.sleep}[sys.argv[1]]
    seconds, handler = float(sys.argv[2]), sys.argv[3]
    noted = []

    class Stopped(BaseException):
        pass

    def stop(signum, frame):
        raise Stopped

    signal.signal(signal.SIGTERM, stop if handler == "raises" else lambda s, f: noted.append(s))
    main = threading.get_native_id()

    def signal_once_main_sleeps():
        # Asleep: waiting in the kernel on something other than a lock (the GIL is a futex).
        while True:
            with open(f"/proc/self/task/{main}/stat") as stat:
                state = stat.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/self/task/{main}/wchan") as wchan:
                waiting_in = wchan.read()
            if state == "S" and "futex" not in waiting_in:
                break
            time.sleep(0.001)  # polling /proc: nothing tells a thread another fell asleep
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # to this thread

    threading.Thread(target=signal_once_main_sleeps, daemon=True).start()
    started = time.monotonic()
    try:
        sleep(seconds)
    except Stopped:
        print(f"stopped {time.monotonic() - started:.3f}")
    else:
        print(f"slept {time.monotonic() - started:.3f} noted {noted}")
    """
)


def sleep_in_a_fresh_interpreter(sleep: str, seconds: float, handler: str) -> tuple[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", SLEEPER, sleep, str(seconds), handler],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    said = done.stdout.split()
    return " ".join([said[0], *said[2:]]), float(said[1])


def test_a_stop_that_reaches_another_thread_ends_the_sleep_at_once() -> None:
    how, took = sleep_in_a_fresh_interpreter("stoppable", 60.0, "raises")
    assert how == "stopped"
    assert took < 60.0  # not the sleep's length: it was cut short


def test_time_sleep_misses_that_stop_until_it_ends() -> None:
    """Why the back-off does not use time.sleep: the same stop leaves it asleep to its end
    (then the handler runs). This is the case the test above would fail on."""
    how, took = sleep_in_a_fresh_interpreter("time", 1.0, "raises")
    assert how == "stopped"
    assert took >= 1.0


@pytest.mark.parametrize("sleep", ["stoppable", "time"])
def test_a_signal_whose_handler_returns_sleeps_on(sleep: str) -> None:
    how, took = sleep_in_a_fresh_interpreter(sleep, 0.5, "notes")
    assert how == "slept noted [15]"
    assert took >= 0.5


def test_the_orchestrators_own_waits_are_stoppable() -> None:
    """The infrastructure back-off, a forge's rate limit in a batch's intake and a
    notice's retry wait in the orchestrator's own process, where a stop must not wait."""
    import dataclasses
    import inspect

    from orchestrator.app.intake import gather
    from orchestrator.app.notify import Notify
    from orchestrator.app.services import Services
    from orchestrator.execution.stoppable_sleep import stoppable_sleep

    defaults = {f.name: f.default for f in dataclasses.fields(Services)}
    assert defaults["sleep"] is stoppable_sleep
    assert {f.name: f.default for f in dataclasses.fields(Notify)}["sleep"] is stoppable_sleep
    assert inspect.signature(gather).parameters["sleep"].default is stoppable_sleep
