"""The one check procedure: begin -> capture -> real call -> judge -> record -> telemetry.

Every source of checks (a compiled graph's forward or backward, an Inductor kernel, a ``@triton.jit``
launch, a ``@shadow`` launcher) calls :func:`run_check` with only what differs between them:

* ``capture(chk)`` — copies what the judge needs *before* the real call (kernels write in place) and
  returns it, or calls ``chk.skip(reason)`` and returns None;
* ``call()`` — the real call; its result is returned to the host unchanged and its exceptions are the
  host's (the check is closed as skipped first);
* ``judge(chk, captured, result)`` — sets ``chk.verdict`` and, on a failure, records the divergence
  through :meth:`Runtime.diverged` (snapshot, telemetry event, log).

The rules of :mod:`gpuemu.hook.runtime` hold for every source: gpuemu's own failures are counted, never
raised (strict mode raises after the real result exists); the real call's time is not shadow time.
"""

from __future__ import annotations

from typing import Any, Callable

# what stats() counts checks by (the sources), from the record's source and check kind
LABELS = ("graph forward", "graph backward", "inductor kernel", "triton kernel", "@shadow",
          "graph (Freivalds)", "graph (sampled rows)", "graph (Freivalds + sampled rows)",
          "graph (every row, in chunks)", "graph (Freivalds + every row, in chunks)",
          "inductor kernel (sampled rows)")  # (the last six: calls too large to copy, gpuemu/hook/large.py)
_LARGE = {"graph.freivalds": "graph (Freivalds)", "graph.rows": "graph (sampled rows)",
          "graph.freivalds+rows": "graph (Freivalds + sampled rows)", "graph.chunks": "graph (every row, in chunks)",
          "graph.freivalds+chunks": "graph (Freivalds + every row, in chunks)"}


def label(source: str, kind: str) -> str:
    if kind in _LARGE:
        return _LARGE[kind]
    if kind == "rerun (sampled rows)":
        return "inductor kernel (sampled rows)"
    if source == "torch.compile":
        return "graph backward" if kind == "graph.backward" else "graph forward"
    return {"inductor": "inductor kernel", "triton": "triton kernel", "shadow": "@shadow"}.get(source, source)


def run_check(rt: Any, *, source: str, name: str, kind: str, op: str | None, dtype: str, bucket: str,
              capture: Callable[[Any], Any], call: Callable[[], Any],
              judge: Callable[[Any, Any, Any], None], nested: bool = False) -> Any:
    """Run one sampled call through the check procedure; returns what ``call()`` returned.

    ``nested``: the calls the real call makes may be checked themselves (a graph's kernels); a
    ``@shadow`` launcher's own kernel launches are not (they are the launcher under check).
    """
    chk = rt.begin(source=source, name=name, kind=kind, op=op, dtype=dtype, bucket=bucket)
    chk.nested = nested
    captured = None
    try:
        captured = capture(chk)
    except Exception as e:
        chk.fail("capture", e)
    chk.pause()
    try:
        result = call()
    except BaseException:
        chk.skip("the call itself raised")
        try:
            chk.end()
        except Exception:  # strict mode must not mask the host's own exception
            pass
        raise
    chk.resume()
    if captured is not None:
        try:
            judge(chk, captured, result)
        except Exception as e:
            chk.fail("judge", e)
    chk.end()
    return result


__all__ = ["run_check", "label", "LABELS"]
