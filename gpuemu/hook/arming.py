"""Arming: the hook's patches exist only while a check may be due, so an unsampled call runs no gpuemu code.

Between samples the hook is *disarmed*: ``JITFunction.run`` and Inductor's ``CachingAutotuner.run`` are
Triton's and Inductor's own, and a graph compiled by the ``gpuemu`` backend calls Inductor's compiled
callable directly (its ``current_callable`` is Inductor's). Nothing of gpuemu is on the stack.

The hook *arms* (puts the patches in place through one undoable :class:`gpuemu.scope.Scope`) when a check may be due:

* **novelty** — at install, when the ``gpuemu`` backend compiles a graph (forward, backward or inference)
  and when Triton compiles a kernel (``triton.knobs.compilation.listener``): a new graph or kernel is
  about to run, and its first call of each (dtype, shape bucket) is checked;
* **schedule** — a timer thread re-arms every ``period`` seconds while the budget allows: a short
  *discovery window* (a shape bucket first seen while disarmed is new then and is checked) with one
  *random sample* (the first call made after the timer fired is checked; ``sample_rate=0`` turns these
  off). The period follows the budget: random samples may use ``RANDOM_SHARE`` of it,
  ``period = max(MIN_PERIOD_S, mean check seconds / (budget * RANDOM_SHARE))`` — at the default budget
  of 5%, random checks take about 0.5% of wall time in steady state; the rest of the budget is for
  novelty, which comes in bursts (a compile, a new shape).

While armed, every call takes the slow path (:meth:`Runtime.decide`). The window closes (the hook
disarms) after ``quiet_calls`` armed calls in a row with nothing new to check and no sample pending
(``QUIET_CALLS`` after novelty, ``SCHEDULE_QUIET_CALLS`` after a tick). ``sample_rate=1`` keeps the hook
armed for good (every call checked, as in tests and debugging).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

MIN_PERIOD_S = 0.5
FIRST_PERIOD_S = 1.0
QUIET_CALLS = 512
SCHEDULE_QUIET_CALLS = 64
RANDOM_SHARE = 0.1


class Arming:
    """Arms and disarms the hook's targets; owned by one Runtime."""

    def __init__(self, *, rate: float, budget: Any, stats: Any, quiet_calls: int = QUIET_CALLS,
                 period: float | None = None, clock: Callable[[], float] = time.perf_counter) -> None:
        self.rate = rate
        self.budget = budget
        self.stats = stats
        self.quiet_calls = quiet_calls
        self.fixed_period = period
        self.clock = clock
        self.armed = False
        self.sample_due = False
        self.quiet = 0
        self.window = quiet_calls  # the open window's length in quiet calls
        self.targets: list[tuple[Callable[[], None], Callable[[], None]]] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ targets

    def add_target(self, arm: Callable[[], None], disarm: Callable[[], None]) -> None:
        """A patch to apply while armed; applied at once if the hook is armed now."""
        with self._lock:
            self.targets.append((arm, disarm))
            if self.armed:
                arm()

    # ------------------------------------------------------------------ state

    @property
    def always(self) -> bool:
        return self.rate >= 1.0

    def arm(self, reason: str, *, sample: bool = False, quiet: int | None = None) -> None:
        """Open (or extend) a window: novelty (compile, install) or a scheduled sample."""
        with self._lock:
            self.quiet = 0
            length = self.quiet_calls if quiet is None else quiet
            self.window = max(self.window, length) if self.armed else length
            if sample and self.rate > 0:
                self.sample_due = True
            self.stats.arms[reason] = self.stats.arms.get(reason, 0) + 1
            self.armed = True
            for arm, _ in self.targets:  # idempotent; again when armed: a compile may bring a new target
                arm()

    def disarm(self) -> None:
        with self._lock:
            if not self.armed or self.always:
                return
            self.armed = False
            self.sample_due = False
            for _, disarm in reversed(self.targets):
                disarm()

    def note(self, *, novel: bool) -> None:
        """One armed call went through the slow path; ``novel``: it found something to check."""
        if novel:
            self.quiet = 0
            return
        self.quiet += 1
        if self.quiet >= self.window and not self.sample_due and not self.always:
            self.disarm()

    def take_sample(self) -> bool:
        """True once after a scheduled tick: the caller's call is the random sample."""
        if self.sample_due:
            self.sample_due = False
            return True
        return False

    # ------------------------------------------------------------------ schedule

    def period(self) -> float:
        if self.fixed_period is not None:
            return self.fixed_period
        st = self.stats
        n = max(st.checks, 1)
        mean = st.shadow_seconds / n if st.checks else FIRST_PERIOD_S * self.budget.fraction * RANDOM_SHARE
        return max(MIN_PERIOD_S, mean / max(self.budget.fraction * RANDOM_SHARE, 1e-9))

    def start(self) -> None:
        """The timer thread that re-arms on schedule (not needed when always armed)."""
        if self.always or self._thread is not None:
            return
        self._stop.clear()
        t = threading.Thread(target=self._run, name="gpuemu-hook-schedule", daemon=True)
        self._thread = t
        t.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period()):
            try:
                if self.budget.allows():
                    self.arm("schedule", sample=True, quiet=min(SCHEDULE_QUIET_CALLS, self.quiet_calls))
            except Exception:  # the schedule must never die of one bad tick
                pass

    def stop_schedule(self) -> None:
        """Stop the timer thread, leave the arming state as it is (tests, or a program that arms by hand)."""
        self._stop.set()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(timeout=1.0)

    def stop(self) -> None:
        self.stop_schedule()
        with self._lock:
            if self.armed:
                self.armed = False
                for _, disarm in reversed(self.targets):
                    disarm()
            self.targets.clear()


__all__ = ["Arming", "QUIET_CALLS", "MIN_PERIOD_S"]
