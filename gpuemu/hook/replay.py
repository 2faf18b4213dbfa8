"""Replaying a hook divergence from its stored snapshot (``gpuemu reproduce SEED`` dispatches here).

A hook record carries ``"hook"`` (a dict) and ``"source"`` (``triton``, ``shadow``, ``inductor`` or
``torch.compile``). Two things are replayed from the exact stored bytes:

* **the recorded output** — the output the real call produced, stored in the snapshot, is judged again
  against a fresh reference (fp64 reference, fp64 graph, or the other launch): this reproduces the
  stored verdict anywhere, a GPU divergence on a CPU machine included;
* **the call** — where it can be re-run here: a bound Triton kernel or a metamorphic pair is launched
  again on the stored arguments (on a CPU under Triton's interpreter), a ``@shadow`` launcher is called
  again, and a graph is recompiled with its inner backend when ``recompile=True``.

>>> from gpuemu.store import Store                                          # doctest: +SKIP
>>> record, tensors = Store(".gpuemu").fetch("0x1a2b3c")                    # doctest: +SKIP
>>> print(replay_record(record, tensors).report())                          # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import SnapshotError
from ..oracle import FAIL, Oracle, Verdict
from .sampling import shadow_work


def is_hook_record(record: Mapping[str, Any]) -> bool:
    """True for records written by the hook (``gpuemu reproduce`` dispatches these to :func:`replay_record`)."""
    return isinstance(record.get("hook"), Mapping)


@dataclass(frozen=True)
class HookReplay:
    """The outcome of a replay: the stored verdict, the recorded output re-judged, and the re-run (if any)."""

    record: dict
    stored: Verdict
    recorded: Verdict
    rerun: Verdict | None
    how: str

    @property
    def verdict(self) -> Verdict:
        """The re-run's verdict where the call could be re-run here, else the recorded output's."""
        return self.rerun if self.rerun is not None else self.recorded

    @property
    def same(self) -> bool:
        """The stored verdict reproduced: same status and kind; the recorded output's error bit for bit."""
        a, b = self.recorded, self.stored
        same_err = a.max_abs_err == b.max_abs_err or (a.max_abs_err is not None and b.max_abs_err is not None and
                                                      math.isclose(a.max_abs_err, b.max_abs_err, rel_tol=1e-9))
        ok = a.status == b.status and a.kind == b.kind and same_err
        if self.rerun is not None:
            ok = ok and self.rerun.status == b.status
        return ok

    def report(self) -> str:
        """Human lines for the CLI."""
        lines = [f"stored:   {self.record.get('line', '?')}",
                 f"recorded output re-judged: {self.recorded.status.upper()} {self.recorded.message}"]
        if self.rerun is not None:
            lines.append(f"re-run ({self.how}): {self.rerun.status.upper()} {self.rerun.message}")
            if self.rerun.detail:
                lines += ["  " + ln for ln in self.rerun.detail.splitlines()]
        else:
            lines.append(f"not re-run: {self.how}")
        lines.append("reproduced: same verdict" + (f", max abs err {self.recorded.max_abs_err!r}"
                                                   if self.recorded.max_abs_err is not None else "")
                     + ("" if self.rerun is not None else " (the recorded output re-judged; nothing was re-run)")
                     if self.same else "NOT reproduced")
        return "\n".join(lines)


def replay_record(record: Mapping[str, Any], tensors: Mapping[str, Any], *, device: str | None = None,
                  recompile: bool = False, rulepack: tuple[str, ...] = (), trust: bool = True) -> HookReplay:
    """Replay a hook divergence from ``Store.fetch``'s (record, tensors); see the module docstring.

    ``device`` defaults to the record's device when it is available here, else ``cpu``. ``trust=False``
    never imports the module a record names (importing runs it: a training script would train): only the
    recorded output is re-judged (``gpuemu reproduce`` passes False unless ``--trust``).
    """
    from .. import config

    if not is_hook_record(record):
        raise SnapshotError("not a hook record (no 'hook' section); replay it with gpuemu.reproduce")
    if record.get("snapshot_omitted"):
        raise SnapshotError(f"divergence {record.get('line', '')} has no snapshot: {record['snapshot_omitted']}")
    tolerances = config.resolve(rulepacks=tuple(rulepack)).tolerance_table()
    dev = device or _default_device(record)
    stored = Verdict.from_dict(record["verdict"])
    source = record.get("source")
    with shadow_work():
        if source == "torch.compile":
            recorded, rerun, how = _replay_graph(record, tensors, dev, tolerances, recompile)
        elif source == "shadow" and record["hook"].get("reference"):
            recorded, rerun, how = _replay_reference_launcher(record, tensors, dev, tolerances, trust)
        elif source == "shadow":
            recorded, rerun, how = _replay_launcher(record, tensors, dev, tolerances, trust)
        elif source == "triton" and record["hook"].get("check") == "metamorphic":
            recorded, rerun, how = _replay_metamorphic(record, tensors, dev, tolerances, trust)
        elif source == "triton":
            recorded, rerun, how = _replay_bound_kernel(record, tensors, dev, tolerances, trust)
        elif source == "inductor":
            recorded, rerun, how = _replay_inductor(record, tensors, tolerances)
        else:
            raise SnapshotError(f"hook record has an unknown source {source!r}")
    return HookReplay(dict(record), stored, recorded, rerun, how)


def _default_device(record: Mapping[str, Any]) -> str:
    want = str(record.get("hook", {}).get("device", "cpu"))
    if want.startswith("cuda"):
        try:
            import torch

            if torch.cuda.is_available():
                return "cuda"
        except Exception:
            pass
    return "cpu"


def _need(tensors: Mapping[str, Any], name: str) -> Any:
    if name not in tensors:
        raise SnapshotError(f"snapshot lacks tensor {name!r}; it cannot be replayed")
    return tensors[name]


def _launch(kernel: Any, grid: list[int], params: dict, options: dict, device: str) -> None:
    """Launch a @triton.jit kernel with a tuple grid; on a CPU without TRITON_INTERPRET, interpret it."""
    k = kernel
    if device == "cpu":
        try:
            from triton.runtime.interpreter import InterpretedFunction

            if not isinstance(kernel, InterpretedFunction):
                k = InterpretedFunction(kernel.fn)
        except ImportError:
            pass
    import numpy as np

    with np.errstate(all="ignore"):
        k[tuple(grid)](**params, **options)


def _load(target: str, file: str | None) -> Any:
    """``gpuemu.target.load``, falling back to the defining file when the module is not importable here."""
    from ..target import load

    try:
        return load(target)
    except Exception:
        if not file:
            raise
        return load(f"{file}:{target.rpartition(':')[2]}")


def _launch_args(record: Mapping[str, Any], tensors: Mapping[str, Any], device: str) -> tuple[Any, dict, dict, dict]:
    from .capture import capture

    launch = record["hook"]["launch"]
    kernel = _load(launch["kernel"], launch.get("file"))
    stored = {name[4:]: t for name, t in tensors.items() if name.startswith("arg.")}
    moved = capture({k: v.to(device) for k, v in stored.items()})  # fresh copies: the launch writes into them
    params: dict = {}
    for name, spec in launch["params"].items():
        if "tensor" in spec:
            params[name] = moved[name]
        elif "value" in spec:
            params[name] = spec["value"]
        else:
            raise SnapshotError(f"kernel parameter {name} was {spec.get('repr')}, which cannot be replayed")
    return kernel, params, dict(launch.get("options", {})), moved


def _untrusted(what: str, record) -> str:
    launch = record["hook"].get("launch") or {}
    where = record["hook"].get("file") or launch.get("file") or what.rpartition(":")[0]
    return (f"{what} lives in {where}; importing it runs that file's code, so it is re-run only with --trust "
            "(gpuemu reproduce SEED --trust)")


def _replay_bound_kernel(record, tensors, device, tolerances, trust=True):
    from .. import ops

    b = record["hook"]["binding"]
    spec = ops.get(b["op"])
    dtype = record["case"]["dtype"]
    oracle = Oracle(tolerances)
    pre = {name[4:]: t for name, t in tensors.items() if name.startswith("arg.")}
    inputs = {a: (pre[p] if p is not None else None) for a, p in b["inputs"].items()}
    kw_vals = {k: record["hook"]["launch"]["params"][p].get("value") for k, p in b["kwargs"].items()}
    recorded = oracle.compare(spec, dtype, inputs, kw_vals, _need(tensors, "out"))
    if not trust:
        return recorded, None, _untrusted(f"kernel {record['hook']['launch']['kernel']}", record)
    kernel, params, options, moved = _launch_args(record, tensors, device)
    inputs_dev = {a: (moved[p].clone() if p is not None else None) for a, p in b["inputs"].items()}
    _launch(kernel, record["hook"]["launch"]["grid"], params, options, device)
    rerun = oracle.compare_on_device(spec, dtype, inputs_dev, kw_vals, params[b["output"]])
    return recorded, rerun, f"kernel {record['hook']['launch']['kernel']} launched on {device}"


def _replay_metamorphic(record, tensors, device, tolerances, trust=True):
    from ..judge import judge_pair, rms_scale

    h = record["hook"]
    out = h["output"]
    alt = dict(h["alternative"])
    alt_grid = alt.pop("grid")
    recorded = judge_pair(_need(tensors, "real"), _need(tensors, "alt"), tolerances=tolerances, what="metamorphic",
                          scale=rms_scale)
    if not trust:
        return recorded, None, _untrusted(f"kernel {h['launch']['kernel']}", record)
    kernel, params, options, _ = _launch_args(record, tensors, device)
    _launch(kernel, h["launch"]["grid"], params, options, device)
    real = params[out]
    kernel, params2, options2, _ = _launch_args(record, tensors, device)
    params2.update(alt)
    _launch(kernel, alt_grid, params2, options2, device)
    rerun = judge_pair(real, params2[out], tolerances=tolerances, what="metamorphic", scale=rms_scale)
    return recorded, rerun, f"kernel launched twice on {device} ({', '.join(f'{k}={v}' for k, v in alt.items())})"


def _replay_launcher(record, tensors, device, tolerances, trust=True):
    from .. import ops
    from .capture import capture, same_bits

    spec = ops.get(record["op"])
    dtype = record["case"]["dtype"]
    kwargs = dict(record["hook"].get("kwargs", {}))
    oracle = Oracle(tolerances)
    inputs = {a.name: tensors.get(f"in.{a.name}") for a in spec.args}
    recorded = oracle.compare(spec, dtype, inputs, kwargs, _need(tensors, "out"))
    if not trust:
        return recorded, None, _untrusted(f"launcher {record['hook']['launcher']}", record)
    try:
        launcher = _load(record["hook"]["launcher"], record["hook"].get("file"))
    except Exception as e:
        return recorded, None, f"launcher {record['hook']['launcher']} cannot be loaded here ({e})"
    launcher = getattr(launcher, "__wrapped__", launcher)
    from ..frameworks import adapt, resolve  # a JAX or TensorFlow launcher takes the stored tensors by DLPack

    launcher = adapt(launcher, resolve(launcher, record["hook"].get("framework")), index_output=spec.out_kind == "index")
    moved = capture({k: v.to(device) for k, v in inputs.items() if v is not None})
    args = [moved.get(a.name) for a in spec.args]
    before = {k: v.clone() for k, v in moved.items()}
    import numpy as np

    with np.errstate(all="ignore"):
        out = launcher(*args, **kwargs)
    rerun = oracle.compare_on_device(spec, dtype, before, kwargs, out)
    mutated = [k for k in moved if not same_bits(moved[k], before[k])]
    if rerun.passed and mutated:
        rerun = Verdict(FAIL, "mutation", f"the launcher modified its input(s) {', '.join(map(repr, mutated))}")
    return recorded, rerun, f"launcher {record['hook']['launcher']} called on {device}"


def _replay_reference_launcher(record, tensors, device, tolerances, trust=True):
    """A ``@shadow(reference=...)`` divergence: the recorded outputs against the reference on the stored arguments,
    then (trusted) the launcher called again on them."""
    from .capture import capture
    from .decorator import reference_judgment

    h = record["hook"]
    names = list(h["args"]) + [f"kw.{k}" for k in h["kwargs"]]
    values = {n: tensors.get(f"in.{n}", h.get("scalars", {}).get(n)) for n in names}
    outs = [tensors[k] for k in sorted((k for k in tensors if k.startswith("out.")), key=lambda k: int(k[4:]))]
    if not trust:  # (judging the recorded outputs needs the reference, which is the user's code too)
        return Verdict.from_dict(record["verdict"]), None, _untrusted(f"reference {h['reference']}", record)
    try:
        reference = _load(h["reference"], None)
        launcher = _load(h["launcher"], h.get("file"))
    except Exception as e:
        raise SnapshotError(f"the launcher or its reference cannot be loaded here ({e})") from None
    launcher = getattr(launcher, "__wrapped__", launcher)
    args = [values[n] for n in h["args"]]
    kwargs = {k: values[f"kw.{k}"] for k in h["kwargs"]}
    recorded, _, _ = reference_judgment(reference, args, kwargs, outs, tolerances)  # (outs: all it judged)
    moved = capture({n: v.to(device) for n, v in values.items() if hasattr(v, "to") and hasattr(v, "shape")})
    full = dict(values, **moved)
    import numpy as np

    with np.errstate(all="ignore"):
        out = launcher(*[full[n] for n in h["args"]], **{k: full[f"kw.{k}"] for k in h["kwargs"]})
    rerun, _, _ = reference_judgment(reference, args, kwargs, out, tolerances, after=[full[n] for n in names])
    return recorded, rerun, f"launcher {h['launcher']} called on {device}, judged against {h['reference']}"


def _replay_inductor(record, tensors, tolerances):
    from ..judge import judge_pair, rms_scale

    recorded = judge_pair(_need(tensors, "real"), _need(tensors, "alt"), tolerances=tolerances, what="inductor",
                          scale=rms_scale)
    return recorded, None, "Inductor's generated kernel is not re-run outside the process that compiled it"


def _replay_graph(record, tensors, device, tolerances, recompile):
    import torch

    from ..backends.fp64 import Fp64Mode, to_fp64
    from ..backends.graph import _fp64_copy, flat_outputs, judge_outputs
    from ..backends.graph_io import graph_from_json

    h = record["hook"]
    if not h.get("graph"):
        raise SnapshotError(f"the graph of this divergence could not be stored ({h.get('graph_unsupported')}); "
                            "its code is in the record under hook.code")
    consts = {k: v.to(device) for k, v in tensors.items() if k.startswith(("const.", "attr."))}
    gm = graph_from_json(h["graph"], consts)
    n_in = sum(1 for nd in h["graph"]["nodes"] if nd["op"] == "placeholder")
    scalars = h.get("scalars", {})
    inputs = []
    for i in range(n_in):
        key = f"in.{i}"
        inputs.append(tensors[key].to(device) if key in tensors else scalars.get(str(i)))
    stored_out = [tensors.get(f"out.{i}") for i in range(len([k for k in tensors if k.startswith("out.")]))]
    with torch.no_grad():
        with Fp64Mode():
            ref = flat_outputs(_fp64_copy(gm)(*[to_fp64(x) for x in inputs]))
        eager = flat_outputs(gm(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
    recorded, _, _ = judge_outputs(stored_out, ref, eager, tolerances)
    if recorded is None:
        raise SnapshotError("the snapshot holds no floating output to judge")
    if not recompile:
        return recorded, None, "graph not recompiled (pass --recompile to compile it again here)"
    from ..backends import compile_inner

    compiled_fn = compile_inner(h.get("inner", "inductor"), gm, inputs, mode=None, options=None)
    with torch.no_grad():
        now = flat_outputs(compiled_fn(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
    rerun, _, _ = judge_outputs(now, ref, eager, tolerances)
    return recorded, rerun, f"graph recompiled with {h.get('inner')} on {device}"


__all__ = ["replay_record", "is_hook_record", "HookReplay"]
