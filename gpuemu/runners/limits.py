"""A per-case time limit: a hang (a spinning kernel under the CPU runtime, or an endless loop in the
launcher's own Python) becomes an ERROR verdict after ``--case-timeout`` seconds instead of a stuck run.

The limit is a SIGALRM timer on the main thread: its handler raises :class:`CaseTimeout` at the next
Python bytecode, which is where both the launcher's Python and the CPU runtime's kernel programs run.
``CaseTimeout`` derives from BaseException so that no ``except Exception`` in a launcher or in gpuemu
swallows it on its way out. A CUDA kernel that spins inside the driver cannot be interrupted this way:
the timer fires when control comes back to Python. Off the main thread (or without SIGALRM) the limit
is not enforced, and :func:`enforceable` says so.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Iterator


class CaseTimeout(BaseException):
    """Raised inside a case that ran past its time limit."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"ran past the per-case time limit of {seconds:g} s")
        self.seconds = seconds


def enforceable() -> bool:
    """True where :func:`time_limit` can interrupt: the main thread of a POSIX process."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`CaseTimeout` in the block once it has run ``seconds`` (None or 0: no limit).

    An outer timer (another tool's, or an enclosing limit) is restored afterwards with what is left of it.

    >>> with time_limit(5):
    ...     pass
    """
    if not seconds or seconds <= 0 or not enforceable():
        yield
        return

    def _expired(signum, frame):
        raise CaseTimeout(seconds)

    t0 = time.monotonic()
    old_handler = signal.signal(signal.SIGALRM, _expired)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay > 0:  # give the outer timer back what it had left (at least a tick, so it still fires)
            signal.setitimer(signal.ITIMER_REAL, max(old_delay - (time.monotonic() - t0), 1e-3), old_interval)
