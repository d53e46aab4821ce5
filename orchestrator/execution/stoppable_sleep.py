"""A sleep that a stop always cuts short: the wait before an infrastructure retry.

``time.sleep`` can miss SIGTERM for its whole length. The interpreter runs a Python
handler only between bytecodes, and only in the main thread; the OS signal itself just
marks the handler due and, if it lands while the main thread is in its sleep's system
call, breaks that call. A signal that lands a moment before the call begins (the thread
just past its last check), or that the OS hands to another thread (an egress proxy's),
breaks nothing: the handler waits for the sleep to end, 600 s at a back-off's cap.

Here the sleep waits on a pipe that every signal writes a byte to
(``signal.set_wakeup_fd``): one that came before the pipe was set has its handler run at
the next bytecode, one that comes after wakes the wait, whichever thread it went to.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time

__all__ = ["stoppable_sleep"]


def stoppable_sleep(seconds: float) -> None:
    """Sleep ``seconds``; a signal whose handler raises (the CLI's SIGINT and SIGTERM)
    ends it at once with that exception. One whose handler returns sleeps on."""
    if threading.current_thread() is not threading.main_thread():
        time.sleep(seconds)  # no handler runs on this thread: nothing here to cut short
        return
    previous = -1  # (a stop that lands as the pipe is set leaves none set)
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        previous = signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            # Returns on a byte (its handler runs on the way out of the call and raises);
            # an interrupted select calls the handler itself (PEP 475).
            if select.select([wake_read], [], [], left)[0]:
                os.read(wake_read, 512)
    finally:
        signal.set_wakeup_fd(previous)
        os.close(wake_read)
        os.close(wake_write)
