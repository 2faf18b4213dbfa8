"""Cases at production size on a CPU: sparse inputs, partial launches, and judging what the sampled programs wrote.

A case drawn by ``--sizes production`` (``Case.shape_kind == "production"``) has tensors of tens to hundreds of
GiB. :func:`evaluate` runs it without allocating them:

- **inputs** live in sparse buffers (:mod:`gpuemu.runtime.sparse`): each 4 KiB page is generated from the
  portable RNG the first time anything touches it, from (case seed, argument, page) alone, so the bytes are the
  same whatever reads them first and the case replays exactly (:func:`page_values`). Arguments under
  :data:`SPARSE_MIN` bytes (weights, biases, token ids) are generated whole, page by page alike;
- **outputs** the launcher allocates (``torch.empty``-like calls) are sparse too, poisoned where unwritten;
- **the launch** runs only chosen programs (:mod:`gpuemu.runtime.partial`: the grid's corners and their
  neighbours, and a few drawn from the seed), one at a time;
- **the judge** compares only what those programs wrote, against the op's fp64 reference computed for exactly
  those regions (:func:`subproblems`): whole rows of row-wise ops (a row the programs wrote part of is judged
  whole, so an unwritten tail shows as poison), contiguous runs of elementwise ops, rectangles of GEMM outputs
  from the matching rows and columns of the operands (K whole), contiguous query blocks of attention per
  (batch, head) with the keys they may see, RoPE rows with their positions' cos/sin, embedding rows with the
  table rows their ids name. The bound is the op's, for the case's full dims (the reduction lengths are the
  restricted problems' own). What cannot be restricted this way: anything whose outputs depend on every row
  (none of the registry's ops) and kernels judged against a user's reference (``gpuemu.schema``), whose
  locality gpuemu cannot know: those run production sizes only where their inputs fit (see docs/production-sizes.md).

Not checked at production size (they are at the fuzzed sizes): determinism (the second run), a program that
leaves part of an elementwise or GEMM tile unwritten (only written elements are compared there), programs that
were not sampled.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from . import ops
from .cases import Case, _float_values, call_kwargs, torch_dtype, value_params
from .compare import ERROR, FAIL, LIMIT, OVERFLOW, PASS, Verdict
from .errors import KernelFinding
from .rng import Rng, derive_seed, raw_u64

SPARSE_MIN = 64 << 20  # bytes: a tensor this large is sparse (pages filled on first touch), a smaller one whole
ROWS_PER_CHECK = 32  # rows (or rectangles' rows) per comparison: bounds the fp64 copies the judge makes
FAMILIES = {  # op -> how its outputs are restricted (see subproblems)
    **{op: "elementwise" for op in ("add", "mul", "relu", "sigmoid", "tanh", "exp", "gelu", "gelu_tanh", "silu",
                                    "softplus", "swiglu", "geglu", "geglu_tanh")},
    **{op: "rows" for op in ("sum", "mean", "amax", "argmax", "cumsum", "softmax", "log_softmax", "logsumexp",
                             "layernorm", "rmsnorm", "cross_entropy")},
    "matmul": "gemm", "bmm": "gemm", "linear": "gemm", "attention": "attention", "rope": "rope",
    "embedding": "embedding",
}


def is_production(case: Case) -> bool:
    return case.shape_kind == "production"


# ---------------------------------------------------------------------- inputs
def _arg_seed(case: Case, index: int) -> int:
    return derive_seed(derive_seed(case.seed, 1), 1000 + index)


def page_values(case: Case, arg: ops.ArgSpec, index: int, page: int, count: int, hi: int | None = None) -> Any:
    """The ``count`` values of page ``page`` of argument ``arg`` (the ``index``-th of its op), as a torch tensor
    of the argument's dtype: floats from the case's distribution (f64 -> f32 -> dtype, as every case rounds
    them), index arguments uniform in [0, ``hi``) (``hi``: the size of the dim they index)."""
    import torch

    seed = derive_seed(_arg_seed(case, index), page)
    if arg.kind == "index":
        raw = raw_u64(seed, count) >> np.uint64(32)
        return torch.from_numpy(((raw * np.uint64(hi)) >> np.uint64(32)).astype(np.int64))
    dist = case.values
    params = case.value_params or value_params(dist, case.spec, case.dtype, case.dims)
    v = _float_values(dist, params, (count,), Rng(seed))
    return torch.from_numpy(v).to(torch.float32).to(torch_dtype(case.dtype))


@dataclass
class Inputs:
    """A production case's inputs (``tensors``, ``kwargs``) and the sparse buffers behind them."""

    tensors: dict[str, Any]
    kwargs: dict[str, Any]
    buffers: dict[str, Any]  # argument name -> its SparseBuffer (the large ones)
    dense: dict[str, Any]  # argument name -> a copy of a whole (small) tensor, for the mutation check

    def close(self) -> None:
        for b in self.buffers.values():
            b.close()


def make_inputs(case: Case) -> Inputs:
    """The inputs of a production case (see the module docstring); contiguous layouts only."""
    import torch

    from .runtime.sparse import PAGE, SparseBuffer

    spec = case.spec
    tensors: dict[str, Any] = {}
    buffers: dict[str, Any] = {}
    dense: dict[str, Any] = {}
    for i, arg in enumerate(spec.args):
        if arg.kind == "const":
            tensors[arg.name] = arg.value
            continue
        if arg.kind == "dim":
            tensors[arg.name] = arg.dim_value(case.dims, case.batch)
            continue
        if case.layouts.get(arg.name, "contiguous") == "none":
            tensors[arg.name] = None
            continue
        shape = arg.resolve(case.dims, case.batch)
        dt = torch.int64 if arg.kind == "index" else torch_dtype(case.dtype)
        itemsize = torch.empty((), dtype=dt).element_size()
        per_page = PAGE // itemsize
        n = math.prod(shape)
        hi = case.dims[arg.index_of] if arg.kind == "index" else None
        if n * itemsize >= SPARSE_MIN:
            def fill(page: int, out: np.ndarray, arg=arg, i=i, hi=hi, itemsize=itemsize) -> None:
                vals = page_values(case, arg, i, page, out.size // itemsize, hi)
                out[:] = vals.view(torch.uint8).numpy()

            buf = SparseBuffer(n * itemsize, fill, name=arg.name)
            buffers[arg.name] = buf
            tensors[arg.name] = buf.tensor(dt, shape)
        else:
            flat = torch.cat([page_values(case, arg, i, p, min(per_page, n - p * per_page), hi)
                              for p in range(max(1, -(-n // per_page)))])[:n] if n else torch.empty(0, dtype=dt)
            if arg.kind == "index" and getattr(arg, "sorted", False):
                flat = flat.sort().values
            t = flat.reshape(shape).contiguous()
            tensors[arg.name] = t
            dense[arg.name] = t.clone()
    return Inputs(tensors, call_kwargs(case), buffers, dense)


def read(t: Any, index: Any) -> Any:
    """``t[index]`` (a copy) for a tensor that may live in a sparse buffer: the pages the rows reach are
    filled first (an input's values, an output's poison) — an untouched page would read as zeros."""
    from .runtime import sparse

    if sparse.active():
        buf = sparse.lookup(t.untyped_storage().data_ptr())
        if buf is not None:
            base = t.data_ptr() - buf.addr
            rows = t.reshape(t.shape[0], -1) if t.dim() > 1 else t.reshape(-1, 1)
            stride = rows.stride(0) * t.element_size()
            width = rows.shape[1] * t.element_size()
            idx = np.unique(np.asarray(index, dtype=np.int64).reshape(-1)) if not isinstance(index, slice) \
                else np.arange(*index.indices(t.shape[0]))
            for r in _runs(idx):
                buf.ensure(base + int(r[0]) * stride, base + int(r[-1]) * stride + width)
    return t[index].clone() if not isinstance(index, slice) else t[index].clone()


def _runs(sorted_idx: np.ndarray) -> list[np.ndarray]:
    """Consecutive runs of a sorted index array."""
    if not sorted_idx.size:
        return []
    cut = np.flatnonzero(np.diff(sorted_idx) != 1) + 1
    return np.split(sorted_idx, cut)


# ---------------------------------------------------------------------- what the programs wrote
def written(out: Any, owned: list) -> np.ndarray | None:
    """Flat indices (sorted) of the elements of ``out`` the launch wrote: not poison any more. Only the pages the
    launch touched are read for a sparse output; None when ``out`` is not in a buffer the run allocated (or a
    dense tensor it poisoned)."""
    import torch

    from .runtime import sparse

    buf = next((b for b in owned if b.addr <= out.untyped_storage().data_ptr() < b.addr + b.size), None)
    if buf is None:
        return None
    if not out.is_contiguous():
        return None
    size = out.element_size()
    start = out.data_ptr() - buf.addr
    pages = np.array(sorted(buf.done), dtype=np.int64)
    found = []
    flat = out.reshape(-1)
    for run in _runs(pages):
        lo = max(int(run[0]) * sparse.PAGE - start, 0) // size
        hi = min((int(run[-1]) + 1) * sparse.PAGE - start, out.numel() * size) // size
        if hi <= lo:
            continue
        vals = flat[lo:hi]
        if buf.fill is None:  # zero-initialised: what is no longer zero (an exact zero result is not seen)
            mask = (vals != 0).numpy() if vals.dtype != torch.bfloat16 else (vals.float() != 0).numpy()
        else:
            mask = ~sparse.is_poison(vals)
        found.append(np.flatnonzero(mask) + lo)
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


# ---------------------------------------------------------------------- restricted problems
Sub = tuple[str, dict, Any]  # (what it covers, inputs of the restricted problem, the output restricted alike)


def subproblems(case: Case, inputs: Mapping[str, Any], out: Any, idx: np.ndarray) -> list[Sub]:
    """The restricted problems that judge the elements ``idx`` (flat indices of ``out``) of ``case``'s output
    (see the module docstring)."""
    family = FAMILIES.get(case.op)
    if family is None:
        raise NotImplementedError(f"op {case.op!r} has no restriction to sampled programs")
    return globals()[f"_{family}"](case, dict(inputs), out, idx)


def _chunks(a: np.ndarray, n: int = ROWS_PER_CHECK) -> list[np.ndarray]:
    return [a[i:i + n] for i in range(0, len(a), n)]


def _rows(case: Case, inputs: dict, out: Any, idx: np.ndarray) -> list[Sub]:
    spec = case.spec
    main = spec.args[0].name  # x / logits
    x = inputs[main]
    N = x.shape[-1]
    x2 = x.reshape(-1, N)
    keeps_last = out.dim() == x.dim() and out.shape[-1] == N
    rows = np.unique(idx // N) if keeps_last else np.unique(idx)
    subs = []
    for r in _chunks(rows):
        sub = dict(inputs)
        sub[main] = read(x2, r)
        if case.op == "cross_entropy":
            sub["target"] = inputs["target"][r]
        o = read(out.reshape(-1, N), r) if keeps_last else read(out.reshape(-1), r)
        subs.append((f"rows {_label(r)}", sub, o))
    return subs


def _elementwise(case: Case, inputs: dict, out: Any, idx: np.ndarray) -> list[Sub]:
    spec = case.spec
    names = [a.name for a in spec.args if a.is_tensor and inputs.get(a.name) is not None]
    subs = []
    for run in _runs(idx):
        for part in _chunks(run, 1 << 16):
            sl = slice(int(part[0]), int(part[-1]) + 1)
            sub = dict(inputs)
            for n in names:
                sub[n] = read(inputs[n].reshape(-1), sl)
            subs.append((f"elements {sl.start}..{sl.stop - 1}", sub, read(out.reshape(-1), sl)))
    return subs


def _rectangles(rows: np.ndarray, cols: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(rows, cols) pairs written, grouped into rectangles: rows with the same set of written columns."""
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    groups: dict[bytes, list[int]] = {}
    col_sets: dict[bytes, np.ndarray] = {}
    bounds = np.flatnonzero(np.diff(rows)) + 1
    for r_cols, r in zip(np.split(cols, bounds), rows[np.concatenate([[0], bounds])] if rows.size else []):
        key = r_cols.tobytes()
        groups.setdefault(key, []).append(int(r))
        col_sets[key] = r_cols
    return [(np.array(rs), col_sets[k]) for k, rs in groups.items()]


def _gemm(case: Case, inputs: dict, out: Any, idx: np.ndarray) -> list[Sub]:
    N = out.shape[-1]
    flat_rows, cols = idx // N, idx % N
    subs = []
    for rows, cs in _rectangles(flat_rows, cols):
        for r in _chunks(rows, 256):
            sub = dict(inputs)
            if case.op == "matmul":
                sub["a"] = read(inputs["a"], r)
                sub["b"] = read(inputs["b"], slice(None))[:, cs]
            elif case.op == "linear":
                K = inputs["x"].shape[-1]
                sub["x"] = read(inputs["x"].reshape(-1, K), r)
                sub["w"] = read(inputs["w"], cs)
                if inputs.get("bias") is not None:
                    sub["bias"] = inputs["bias"][cs]
            else:  # bmm: flat rows are (batch, row) pairs of one batch each after grouping by batch below
                M = inputs["a"].shape[1]
                subs += _bmm(inputs, out, r, cs, M)
                continue
            o = read(out.reshape(-1, N), r)[:, cs]
            subs.append((f"rows {_label(r)} x cols {_label(cs)}", sub, o))
    return subs


def _bmm(inputs: dict, out: Any, rows: np.ndarray, cs: np.ndarray, M: int) -> list[Sub]:
    subs = []
    for b in np.unique(rows // M):
        r = rows[rows // M == b] % M
        sub = dict(inputs)
        sub["a"] = read(inputs["a"][int(b)], r).unsqueeze(0)
        sub["b"] = read(inputs["b"][int(b)], slice(None))[:, cs].unsqueeze(0)
        o = read(out[int(b)], r)[:, cs].unsqueeze(0)
        subs.append((f"batch {int(b)} rows {_label(r)} x cols {_label(cs)}", sub, o))
    return subs


def _attention(case: Case, inputs: dict, out: Any, idx: np.ndarray) -> list[Sub]:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    rows = np.unique(idx // D)  # flat (b, h, query)
    causal = bool(case.kwargs.get("causal"))
    subs = []
    for run in _runs(rows):
        for part in _chunks(run, 64):
            bh, q0 = divmod(int(part[0]), Nq)
            if (int(part[-1]) // Nq) != bh:  # a run across two heads: split it
                head = part[part // Nq == bh]
                rest = part[part // Nq != bh]
                subs += _attention_block(q, k, v, out, head, Nq, Nk, causal)
                subs += _attention_block(q, k, v, out, rest, Nq, Nk, causal) if rest.size else []
                continue
            subs += _attention_block(q, k, v, out, part, Nq, Nk, causal)
    return subs


def _attention_block(q, k, v, out, part: np.ndarray, Nq: int, Nk: int, causal: bool) -> list[Sub]:
    bh = int(part[0]) // Nq
    H = q.shape[1]
    b, h = divmod(bh, H)
    q0, q1 = int(part[0]) % Nq, int(part[-1]) % Nq + 1
    kend = max(1, min(Nk, q1 + Nk - Nq)) if causal else Nk  # the keys these queries may see (all, unmasked)
    sub = {"q": read(q[b, h], slice(q0, q1)).reshape(1, 1, q1 - q0, -1),
           "k": read(k[b, h], slice(0, kend)).reshape(1, 1, kend, -1),
           "v": read(v[b, h], slice(0, kend)).reshape(1, 1, kend, -1)}
    o = read(out[b, h], slice(q0, q1)).reshape(1, 1, q1 - q0, -1)
    return [(f"batch {b} head {h} queries {q0}..{q1 - 1}", sub, o)]


def _rope(case: Case, inputs: dict, out: Any, idx: np.ndarray) -> list[Sub]:
    x = inputs["x"]
    B, Nn, H, D = x.shape
    rows = np.unique(idx // D)  # flat (b, n, h)
    subs = []
    for r in _chunks(rows):
        pos = (r // H) % Nn
        sub = dict(inputs)
        sub["x"] = read(x.reshape(-1, D), r).reshape(1, len(r), 1, D)
        sub["cos"] = read(inputs["cos"], pos)
        sub["sin"] = read(inputs["sin"], pos)
        o = read(out.reshape(-1, D), r).reshape(1, len(r), 1, D)
        subs.append((f"rows {_label(r)}", sub, o))
    return subs


def _embedding(case: Case, inputs: dict, out: Any, idx: np.ndarray) -> list[Sub]:
    import torch

    table = inputs["table"]
    D = table.shape[1]
    rows = np.unique(idx // D)
    ids = inputs["ids"].reshape(-1)
    subs = []
    for r in _chunks(rows, 256):
        want = ids[r]
        uniq, remap = torch.unique(want, return_inverse=True)
        sub = {"ids": remap, "table": read(table, uniq.cpu().numpy())}
        subs.append((f"rows {_label(r)}", sub, read(out.reshape(-1, D), r)))
    return subs


def _label(a: np.ndarray) -> str:
    a = np.asarray(a)
    if a.size <= 3:
        return ",".join(str(int(x)) for x in a)
    return f"{int(a[0])}..{int(a[-1])} ({a.size})"


# ---------------------------------------------------------------------- the evaluation
def evaluate(oracle: Any, launcher: Callable, case: Case, *, tol: Any = None) -> Any:
    """Run and judge a production case (see the module docstring); an :class:`gpuemu.oracle.Evaluation`."""
    import torch

    from .device_arith import case_tolerance
    from .oracle import Evaluation, LaunchRefused, _with
    from .runners import run_launcher
    from .runtime import sparse
    from .runtime.partial import partial

    spec = case.spec
    t0 = time.perf_counter()
    inp = make_inputs(case)
    owned: list = []
    try:
        args = [inp.tensors[a.name] for a in spec.args]
        t_gen = time.perf_counter() - t0
        with sparse.allocations(0, owned), partial(seed=case.seed):
            run = run_launcher(launcher, args, dict(inp.kwargs), device="cpu", poison=False)
        secs = {"generate": t_gen, "kernel": run.seconds}

        def done(v: Verdict) -> Any:
            return Evaluation(_with(v, seconds=dict(secs, **v.seconds)), run.launches)

        if isinstance(run.error, KernelFinding):
            status = OVERFLOW if run.error.kind == "overflow" else FAIL
            return done(Verdict(status, run.error.kind, run.error.message))
        if isinstance(run.error, LaunchRefused):  # the same LIMIT the oracle gives (gpuemu.envelope)
            return done(Verdict(LIMIT, "out_of_resources", run.error.message, detail=run.error.detail))
        if run.error is not None:
            return done(Verdict(ERROR, "exception", f"launcher raised {run.error_text}"))
        mutated = [n for n, b in inp.buffers.items() if b.written or b.changed()]
        mutated += [n for n, t in inp.dense.items() if not torch.equal(inp.tensors[n], t)]
        if mutated:
            return done(Verdict(FAIL, "mutation", f"the launcher modified its input{'s' if len(mutated) > 1 else ''} "
                                                  f"{', '.join(repr(m) for m in mutated)} (inputs must stay unchanged)"))
        out = run.output
        if not isinstance(out, torch.Tensor):
            return done(Verdict(FAIL, "type", f"returned {type(out).__name__}, expected a torch.Tensor"))
        idx = written(out, owned)
        if idx is None:
            return done(Verdict(ERROR, "unsupported", "the output is not a tensor the launcher allocated "
                                                      "(a view of an input, or non-contiguous): a production-size "
                                                      "case judges only what the sampled programs wrote into it"))
        ran = sum(int(lch.options.get("programs_run") or 0) for lch in run.launches)
        if not idx.size:
            return done(Verdict(FAIL, "unwritten", f"the {ran} sampled programs wrote nothing to the output"))
        tol = tol or oracle.tolerances.get(spec.name, case.dtype, device="cpu")
        tol = case_tolerance(tol, spec, case.dims, "cpu")
        t1 = time.perf_counter()
        checked, worst = 0, None
        for what, sub, o in subproblems(case, inp.tensors, out, idx):
            v = oracle.compare(spec, case.dtype, sub, inp.kwargs, o, tol=tol)
            checked += o.numel()
            if v.status != PASS:
                msg = f"{v.message} (in {what} of the output, written by the sampled programs)"
                secs["compare"] = time.perf_counter() - t1
                return done(_with(v, message=msg))
            if worst is None or (v.worst_ratio or 0) > (worst.worst_ratio or 0):
                worst = v
        secs["compare"] = time.perf_counter() - t1
        memory = sum(b.committed() for b in list(inp.buffers.values()) + owned)
        note = (f"production size: {ran} sampled programs wrote {idx.size} of {out.numel()} output elements, "
                f"{checked} judged; {memory >> 20} MiB of the tensors' "
                f"{(sum(b.nbytes for b in inp.buffers.values()) + sum(b.nbytes for b in owned)) >> 20} MiB touched")
        v = worst or Verdict(PASS)
        return done(_with(v, status=PASS, detail=(v.detail + "\n" if v.detail else "") + note))
    finally:
        inp.close()
        for b in owned:
            b.close()


__all__ = ["SPARSE_MIN", "FAMILIES", "is_production", "make_inputs", "page_values", "written", "subproblems",
           "evaluate", "read"]
