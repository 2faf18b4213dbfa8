"""Which calls get a shadow check: first calls of each key, then a sampled fraction, within a time budget.

The key of a call is (site, dtype, shape bucket): the site is the kernel, compiled graph or launcher; dtype
and shape bucket are those of the call's *signature tensor* (its first tensor argument), each dim rounded
up to a power of two. The first call of a new key is always checked (when the budget allows; otherwise
it is counted under the skip reason ``budget`` and tried again on a later call); every other call is
checked with probability ``sample_rate``, and a scheduled tick of :mod:`gpuemu.hook.arming` forces one
random sample.

These decisions are made only while the hook is armed (:mod:`gpuemu.hook.arming`): between samples no
call reaches this module. A site caches its last signature's key, so an armed call with an unchanged
signature builds no strings.

Budget: shadow work may use at most ``budget`` of the wall time since install, with an initial allowance
of ``budget * WINDOW_S`` seconds (3 s at the default 5%): novelty comes in a burst at start-up, when the
first graphs and kernels run, and the first check of a graph costs far more than later ones.

Novelty is served first, then shared fairly. A site's *first* check (a graph, kernel or launcher never
checked yet) is made while shadow time stays under twice the allowance; a new key of a site already
checked is made while its source (graph forward, graph backward, inductor kernel, triton kernel, @shadow)
has spent less than its fair share — the allowance over the number of sources seen so far. Without this,
on the H200, the first forward-graph and kernel checks of a training job (about a second each) used the
whole allowance, and the backward graph and the backward kernels, which start milliseconds later, were
never checked. Shadow time may so reach twice the allowance during the start-up burst; every later check
then waits until wall time has caught up, so the long-run share stays ``budget``. Random samples never
use these rules: they need the budget itself.
"""

from __future__ import annotations

from ..compare import dtype_label  # noqa: F401 (re-exported: the hook's modules read it here)

import math
import random
import threading
import time
from typing import Any

WINDOW_S = 60.0
_NEVER = 1 << 62

_tls = threading.local()


def busy() -> bool:
    """True while this thread does shadow work: launches made then are not shadowed again."""
    return getattr(_tls, "busy", 0) > 0


class shadow_work:
    """Context manager marking this thread busy with shadow work (re-entrant calls pass straight through)."""

    __slots__ = ()

    def __enter__(self) -> None:
        _tls.busy = getattr(_tls, "busy", 0) + 1

    def __exit__(self, *exc: Any) -> None:
        _tls.busy -= 1


class Budget:
    """At most ``fraction`` of wall time (since creation, at least WINDOW_S) spent on shadow work."""

    def __init__(self, fraction: float, *, clock=time.perf_counter, window: float = WINDOW_S) -> None:
        self.fraction = float(fraction)
        self.clock = clock
        self.window = window
        self.start = clock()
        self.spent = 0.0
        self.spent_by: dict[str, float] = {}  # shadow seconds by source label
        self._lock = threading.Lock()

    def allowance(self) -> float:
        return self.fraction * max(self.clock() - self.start, self.window)

    def allows(self) -> bool:
        return self.spent < self.allowance()

    def allows_new(self, source: str, *, first_of_site: bool = False) -> bool:
        """For a new key of ``source``: the budget allows it, or it is a site's first check and shadow time
        is under twice the allowance, or ``source`` is under its fair share (module docstring)."""
        allowance = self.allowance()
        if self.spent < allowance or (first_of_site and self.spent < 2 * allowance):
            return True
        if not source:
            return False
        by = self.spent_by
        if source not in by:
            by[source] = 0.0  # a source seen for the first time joins the sharing
        return by[source] < allowance / len(by)

    def headroom(self) -> float:
        """Seconds of shadow work the budget allows right now."""
        return self.allowance() - self.spent

    def charge(self, seconds: float, source: str | None = None) -> None:
        with self._lock:
            self.spent += max(0.0, seconds)
            if source is not None:
                self.spent_by[source] = self.spent_by.get(source, 0.0) + max(0.0, seconds)

    def share(self) -> float:
        """Fraction of wall time spent on shadow work so far."""
        elapsed = self.clock() - self.start
        return self.spent / elapsed if elapsed > 0 else 0.0


class Site:
    """One kernel, graph or launcher: its countdown, last signature and the keys already checked."""

    __slots__ = ("name", "source", "countdown", "shape", "dtype", "key", "seen", "plan", "extra", "sig")

    def __init__(self, name: str, source: str = "") -> None:
        self.name = name
        self.source = source  # the source label its checks count under (its share of the budget)
        self.countdown = 0  # calls until the next random sample (0: draw a gap on the next call)
        self.shape: Any = None
        self.dtype: Any = None
        self.key: tuple | None = None  # the key of (shape, dtype) above
        self.seen: set = set()
        self.plan: Any = None
        self.extra: dict = {}
        self.sig: int | None = None  # position of the signature tensor among the positional arguments


BUDGET = "budget: shadow time over its share of wall time; the key is checked on a later call"


class Sampler:
    """Decides, for one armed call, whether it is checked (see the module docstring)."""

    def __init__(self, rate: float, budget: Budget, *, seed: int | None = None) -> None:
        self.rate = float(rate)
        self.budget = budget
        self.rng = random.Random(seed)
        self.last_new = False  # whether the last decided call had a key not checked yet

    def gap(self) -> int:
        """Calls until the next sampled one: geometric with success probability ``rate``."""
        p = self.rate
        if p >= 1.0:
            return 1
        if p <= 0.0:
            return _NEVER
        u = 1.0 - self.rng.random()  # (0, 1]
        return int(math.log(u) / math.log1p(-p)) + 1

    def decide(self, site: Site, sig: Any, *, force: bool = False) -> tuple[bool, tuple, str | None]:
        """(check this call?, its key, why a call that should be checked is not: None or :data:`BUDGET`)."""
        shape = getattr(sig, "shape", None)
        dtype = getattr(sig, "dtype", None)
        key = site.key
        if key is None or shape != site.shape or dtype != site.dtype:
            key = (dtype_label(dtype), shape_bucket(shape))
            site.shape, site.dtype, site.key = shape, dtype, key
        new = self.last_new = key not in site.seen
        site.countdown -= 1
        due = site.countdown <= 0
        if due:
            site.countdown = self.gap()
        if not (new or due or force):
            return False, key, None
        ok = self.budget.allows_new(site.source, first_of_site=not site.seen) if new else self.budget.allows()
        if not ok:
            return False, key, (BUDGET if new or force else None)
        site.seen.add(key)
        return True, key, None


def shape_bucket(shape: Any) -> str:
    """Each dim rounded up to a power of two: [8, 257, 64] -> '8x512x64'; a scalar -> 'scalar'."""
    if shape is None:
        return "none"
    dims = [int(d) for d in shape]
    if not dims:
        return "scalar"
    return "x".join(str(1 << max(0, (d - 1).bit_length())) if d > 0 else "0" for d in dims)
