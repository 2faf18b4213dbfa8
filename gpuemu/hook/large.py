"""Checks of calls too large to copy: the capture is bounded by what is sampled, not by the call's size.

Two sources used to skip such calls ("arguments exceed max_capture_bytes", "graph inputs exceed
max_capture_bytes"); now:

**Inductor kernels** (:func:`inductor_capture`, :func:`inductor_judge`). Inductor names a generated kernel's
pointer arguments by how the kernel uses them: ``in_ptr*`` are only read, ``out_ptr*`` only written,
``in_out_ptr*`` both. A read-only argument needs no copy (the re-run reads it as the real launch did, and
nothing wrote it in between); a write-only output gets a fresh buffer filled with poison (NaN, or the integer
minimum) instead of a copy; only read-write arguments (and arguments of any other name) are copied. The kernel
is re-launched on that, and sampled rows of every output (the first, the last and up to 62 drawn, each a whole
last-dim row) are compared with the real launch's, where the re-run wrote them. What the check allocates is the
written arguments' size; an LM head's log-softmax over a [tokens, vocab] logits buffer, which only reads the
logits, costs its per-row outputs. The read-write copies must fit ``max_capture_bytes``; the poisoned
write-only outputs are a transient scratch (:func:`scratch_refused`): past ``max_capture_bytes`` they must fit
``max_scratch_bytes`` (4 GiB) and, on CUDA, a quarter of the device's free memory, checked again just before
they are allocated after the real call; they are freed as soon as the sampled rows are read (a kernel writing
the [tokens, vocab] gradient of the logits costs that gradient's size for the re-run only). Past those limits the
call is a skip ("outputs exceed max_capture_bytes and max_scratch_bytes", or "... and a quarter of free device
memory (scratch)"); an allocation that fails anyway is a skip too, never the host's error.

**Compiled graphs** (:func:`freivalds_plan`, :func:`freivalds_judge`). A graph whose inputs are too large to
copy is not re-run; instead every output that is a matrix product (``mm``, ``addmm``, ``bmm``, possibly viewed,
transposed or cast) of tensors still at hand after the call (the graph's inputs, or its other outputs: a
training forward graph returns the activations its backward needs) is checked by Freivalds' algorithm: for two
random sign vectors x, ``C x`` against ``A (B x)`` in fp64, O(n^2) instead of the O(n^3) product, in row
chunks so that no fp64 copy of a whole operand is made. Each element may be off by ``t (|A||B|)_ij``,
``t = u_out + K u_acc`` (the output's rounding, fp32 accumulation over K); over random signs a row's
difference is then about ``t`` times the row norm of ``|A||B|``, which eight Gaussian probes of
``|A| (|B| z)`` estimate; the bound is eight times that. A wrong element, a wrong tile or a wrapped offset is
far beyond it; an output off by 0.1% in fp32 is too (the test's planted bug). An operand the graph computes (the normed hidden
state of an inference graph) is computed eagerly from what is at hand, by anything but a matrix product, and
may differ from the compiled one by its own rounding: the bound is taken four times. Counted as
"graph (Freivalds)" in ``stats()``.

**Compiled graphs, row-local outputs** (gpuemu/backends/row_local.py, judged by ``_rows_judge`` in
gpuemu/backends/graph.py). The outputs that sampled rows of the large inputs determine (the cross-entropy
loss's log-softmax or log-sum-exp, its backward's gradient of the logits; a whole transformer's forward by
sampled sequences, the row being the batch dim, since attention mixes only a sequence's own tokens) are
compared at those rows with the graph re-run in fp64 on the inputs restricted to them, bounded by
``max_scratch_bytes`` and, on CUDA, a quarter of free memory (fewer than :data:`ROWS` rows when as many
sequences would not fit). Outputs that reduce
over the rows by a mean or a max (the mean loss itself) are not compared: ``stats()["outputs_unchecked"]`` counts
them by reason. Outputs that *sum* over the rows (a backward graph's weights' gradients: GPT-2's whole backward
takes the [tokens, vocab] gradient of the logits and returns only those) are evaluated on every row instead, in
chunks of rows as large as the budget allows, each chunk's share added up in fp64 (the row-local outputs are then
judged chunk by chunk too): counted as "graph (every row, in chunks)" or "graph (Freivalds + every row, in
chunks)". What it allocates is one chunk's evaluation and the sums; what it costs is the graph's work in fp64.
Inputs the compiled call overwrites (a backward's saved activations donated to Inductor, an optimizer's in-place
update) are copied before the call when they fit ``max_capture_bytes``; otherwise the rows' evaluation runs before
the call and the products Freivalds' check would read from them are counted unchecked (gpuemu/backends/graph.py,
``_spare_overwritten``). A graph whose inputs fit the cap but whose fp64 re-run would not fit the scratch (a
language model's logits) is judged here too.
Counted as "graph (sampled rows)", or "graph (Freivalds + sampled rows)" when a graph has both kinds of
output (one check: Freivalds' verdict first, then the rows'). A graph with neither stays a skip whose reason
says why ("graph inputs exceed max_capture_bytes (no output is a matrix product of tensors at hand; no output
is row-local: aten.cumsum.default works along a row dim)").
"""

from __future__ import annotations

from typing import Any

import numpy as np

ROWS = 64  # rows of each output compared by a sampled re-run (first, last, the rest drawn)
CHUNK_ROWS = 4096  # rows converted to fp64 at a time by the Freivalds products
_U = {"torch.float32": 2.0**-24, "torch.float16": 2.0**-11, "torch.bfloat16": 2.0**-8, "torch.float64": 2.0**-53}
_VIEWS = {"view", "reshape", "_unsafe_view", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze", "alias",
          "_to_copy", "clone", "detach", "contiguous", "_reshape_alias", "as_strided"}
_MM = {"mm", "addmm", "bmm", "matmul", "linear"}  # (linear: a Dynamo graph's x @ w.T + bias)
_SHAPES = {"view", "reshape", "_unsafe_view", "alias", "detach", "clone", "_to_copy"}  # (row-major values kept)


# ---------------------------------------------------------------------- Inductor kernels
def _role(name: str) -> str:
    if name.startswith("in_out_ptr"):
        return "inout"
    if name.startswith("in_ptr"):
        return "in"
    if name.startswith("out_ptr"):
        return "out"
    return "inout"  # (a name Inductor's convention does not tell: copied, as if read and written)


def inductor_capture(rt: Any, chk: Any, tensors: dict) -> dict | None:
    """The bounded capture of a launch whose full copy exceeds ``max_capture_bytes``; None (and a skip reason)
    when even the written arguments exceed it."""
    from .capture import capture, storage_bytes

    written = {n: t for n, t in tensors.items() if _role(n) != "in"}
    if not written:
        chk.skip("the kernel has no output argument")
        return None
    reads = {t.untyped_storage().data_ptr() for n, t in tensors.items() if _role(n) == "in"}
    if any(t.untyped_storage().data_ptr() in reads for t in written.values()):
        chk.skip("an output shares memory with an input (no bounded capture)")
        return None
    inout = {n: t for n, t in written.items() if _role(n) == "inout"}
    if storage_bytes(written.values()) > rt.settings.max_capture_bytes:
        if storage_bytes(inout.values()) > rt.settings.max_capture_bytes:
            chk.skip("read-write outputs exceed max_capture_bytes")
            return None
        outs = [t for n, t in written.items() if n not in inout]
        why = scratch_refused(rt, storage_bytes(outs), outs[0].device if outs else None, what="outputs")
        if why:
            chk.skip(why)
            return None
    pre = capture(inout)
    from ..telemetry import ATTR_CHECK

    chk.kind = chk.attrs[ATTR_CHECK] = "rerun (sampled rows)"
    return {"__sampled__": True, "copies": pre}


def scratch_refused(rt: Any, need: int, device: Any, *, what: str) -> str | None:
    """Why ``need`` bytes of transient scratch on ``device`` (the poisoned outputs of a kernel's re-run, a
    graph's sampled-rows evaluation) may not be allocated now, or None: they must fit ``max_scratch_bytes`` and,
    on CUDA, a quarter of the device's free memory at that moment (the host's own allocations come first; the
    scratch lives for the check only). Free memory counts what the driver has free and what PyTorch's caching
    allocator holds unused (reserved, not allocated): the scratch is served from that cache first, and a training
    step's allocator keeps gigabytes of it between steps that the driver reports as used."""
    if need > rt.settings.max_scratch_bytes:
        return f"{what} exceed max_capture_bytes and max_scratch_bytes"
    if device is not None and getattr(device, "type", None) == "cuda":
        import torch

        free, _ = torch.cuda.mem_get_info(device)
        free += max(0, torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
        if need > free // 4:
            return f"{what} exceed max_capture_bytes and a quarter of free device memory (scratch)"
    return None


def _poisoned_like(t: Any) -> Any:
    """A tensor of ``t``'s geometry over a fresh storage of poison (NaN, or the integer minimum)."""
    import torch

    st = torch.empty(t.untyped_storage().nbytes(), dtype=torch.uint8, device=t.device).untyped_storage()
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    out.set_(st, t.storage_offset(), t.size(), t.stride())
    flat = torch.empty(0, dtype=t.dtype, device=t.device).set_(st, 0, (st.nbytes() // t.element_size(),), (1,))
    flat.fill_(float("nan") if t.is_floating_point() else torch.iinfo(t.dtype).min)
    return out


def sample_rows(n: int, seed: int = 0, count: int = ROWS) -> list[int]:
    """Up to ``count`` (:data:`ROWS`) row indices of ``n``: the first, the last and drawn ones (sorted, distinct)."""
    if n <= count:
        return list(range(n))
    if count <= 2:
        return [0, n - 1][:max(count, 1)]
    rng = np.random.default_rng(seed)
    return [0, *sorted((rng.choice(n - 2, count - 2, replace=False) + 1).tolist()), n - 1]  # (exactly count)


def _rows(t: Any, idx: list[int]) -> Any:
    t2 = t.reshape(-1, t.shape[-1]) if t.dim() >= 2 else t.reshape(-1, 1)
    return t2[idx]


def inductor_judge(rt: Any, chk: Any, launcher: Any, how: str, names: list, args: tuple, kwargs: dict,
                   tensors: dict, pre: dict) -> None:
    """Re-launch on the bounded capture and compare sampled rows of every written argument."""
    import torch

    from ..judge import judge_pair, rms_scale
    from ..oracle import FAIL
    from .capture import storage_bytes

    copies = pre["copies"]
    outs = [t for n, t in tensors.items() if _role(n) != "in" and n not in copies]
    need = storage_bytes(outs)
    why = scratch_refused(rt, need, outs[0].device, what="outputs") if need > rt.settings.max_capture_bytes else None
    if why:  # (checked again: the real call ran since the capture, and the device's free memory moved)
        chk.skip(why)
        return
    try:
        scratch = {n: (copies[n].clone() if n in copies else _poisoned_like(t)) for n, t in tensors.items()
                   if _role(n) != "in"}
    except torch.OutOfMemoryError:
        chk.skip("scratch allocation failed: out of memory")
        return
    new_args = tuple(scratch.get(n, a) for n, a in zip(names, args))
    with torch.no_grad():
        launcher(*new_args, **{k: v for k, v in kwargs.items() if k != "benchmark_run"})
    rows_seen: dict = {}
    alt = None
    for n, alt in scratch.items():
        if tensors[n].numel() == 0:
            continue
        rows = tensors[n].reshape(-1, tensors[n].shape[-1]).shape[0] if tensors[n].dim() >= 2 else tensors[n].numel()
        idx = sample_rows(rows, seed=rt.stats.checks + rows)
        r_real, r_alt = _rows(tensors[n], idx), _rows(alt, idx)
        if n not in copies:  # (only what the re-run wrote: a kernel writing part of a buffer leaves the rest)
            unwritten = r_alt.isnan() if r_alt.is_floating_point() else r_alt == torch.iinfo(r_alt.dtype).min
            r_alt = torch.where(unwritten, r_real, r_alt)
        rows_seen[n] = (idx, r_real, r_alt)
    del scratch, new_args, alt  # (the scratch lives for the re-run only; the sampled rows are copies)
    worst = worst_n = None
    for n, (idx, r_real, r_alt) in rows_seen.items():
        v = judge_pair(r_real, r_alt, tolerances=rt.tolerances, what="inductor", scale=rms_scale,
                       scale_doc=f"max(|out|, |out of {how}|, rms) over {len(idx)} sampled rows")
        if worst is None or (v.status == FAIL and (worst.status != FAIL or (v.worst_ratio or 0) > (worst.worst_ratio or 0))):
            worst, worst_n = v, n
    if worst is None:
        chk.skip("the kernel wrote no tensor argument")
        return
    chk.verdict = worst
    if worst.status == FAIL:
        idx, r_real, r_alt = rows_seen[worst_n]
        rt.diverged(chk, worst, what=f"Inductor kernel {chk.name} output {worst_n} differs when re-run with {how} "
                                     f"(sampled rows of a call too large to copy)",
                    shape=list(tensors[worst_n].shape),
                    record={"hook": {"inductor": {"kernel": chk.name, "output": worst_n, "how": how, "rows": idx}}},
                    tensors={"real_rows": r_real, "alt_rows": r_alt})


# ---------------------------------------------------------------------- graphs: Freivalds
def _strip(node: Any) -> tuple[Any, bool]:
    """The node an output's value comes from through reshapes, casts and 2-D transposes, and whether an odd
    number of transposes lies between (a backward graph returns ``t(mm(...))`` as a weight's gradient)."""
    flipped = False
    while node.op == "call_function" and node.args and hasattr(node.args[0], "op"):
        name = _opname(node)
        if name in _SHAPES:
            node = node.args[0]
        elif name == "t" or (name in ("transpose", "permute") and _two_d_swap(node)):
            flipped = not flipped
            node = node.args[0]
        else:
            break
    return node, flipped


def _two_d_swap(node: Any) -> bool:
    """A transpose or permute of a 2-D value that swaps its two dims."""
    meta = node.args[0].meta.get("val") if hasattr(node.args[0], "meta") else None
    if meta is None or getattr(meta, "dim", lambda: 0)() != 2:
        return False
    if _opname(node) == "transpose":
        return len(node.args) >= 3 and int(node.args[1]) % 2 != int(node.args[2]) % 2
    return [int(d) % 2 for d in node.args[1]] == [1, 0]


def _opname(node: Any) -> str:
    t = node.target
    name = getattr(t, "__name__", str(t))
    return name.split(".")[0]


def freivalds_plan(gm: Any) -> list[tuple[int, Any, Any, Any, Any]]:
    """(output index, its node, A node, (B node, B is linear's weight), bias node or None, the output is the product
    transposed) of every graph output that is a matrix product
    whose operands a caller has after the call: placeholders or other outputs, reached through views and casts."""
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(out_node.args[0]) if isinstance(out_node.args[0], (list, tuple)) else [out_node.args[0]]
    available = {n for n in gm.graph.nodes if n.op == "placeholder"} | {o for o in outs if hasattr(o, "op")}

    memo: dict = {}

    def reachable(n: Any) -> bool:
        """At hand after the call, or computed from such by anything but a matrix product (a norm, a cast)."""
        if n in available or n.op == "get_attr":
            return True
        if n not in memo:
            memo[n] = False  # (cycles cannot occur; this also bounds the walk)
            ins = [a for a in list(n.args) + list(n.kwargs.values()) for a in (a if isinstance(a, (list, tuple)) else [a])
                   if hasattr(a, "op")]
            memo[n] = n.op == "call_function" and _opname(n) not in _MM and "rand" not in _opname(n) \
                and all(reachable(a) for a in ins)
        return memo[n]

    plan = []
    for i, o in enumerate(outs):
        if not hasattr(o, "op"):
            continue
        mm, flipped = _strip(o)
        if mm.op != "call_function" or _opname(mm) not in _MM or (flipped and _opname(mm) not in ("mm", "addmm")):
            continue
        bias, transposed = None, False
        a, b = mm.args[0], mm.args[1]
        if _opname(mm) == "addmm":
            bias, a, b = mm.args[0], mm.args[1], mm.args[2]
        elif _opname(mm) == "linear":
            bias = mm.args[2] if len(mm.args) > 2 else mm.kwargs.get("bias")
            transposed = True
        if not hasattr(bias, "op"):
            bias = None
        if all(hasattr(x, "op") and reachable(x) for x in (a, b)) and (bias is None or reachable(bias)):
            plan.append((i, o, a, (b, transposed), bias, flipped))
    return plan


def _value(n: Any, env: dict, gm: Any = None) -> Any:
    """The value of node ``n`` from the call's inputs and outputs (``env``), computing what lies between eagerly."""
    import operator

    if n in env:
        return env[n]
    if n.op == "get_attr":
        v = operator.attrgetter(n.target)(env["__gm__"])
        env[n] = v
        return v

    def val(a: Any) -> Any:
        if hasattr(a, "op"):
            return _value(a, env)
        if isinstance(a, (list, tuple)):
            return type(a)(val(x) for x in a)
        return a

    fn_args = [val(a) for a in n.args]
    kwargs = {k: val(v) for k, v in n.kwargs.items()}
    v = n.target(*fn_args, **kwargs)
    env[n] = v
    return v


def _matvec(m: Any, x: Any) -> Any:
    """``m @ x`` in fp64 (m: [..., R, K], x: [..., K, k]) a chunk of rows at a time, on m's device."""
    import torch

    rows = m.shape[-2]
    parts = [m[..., r:r + CHUNK_ROWS, :].to(torch.float64) @ x for r in range(0, rows, CHUNK_ROWS)]
    return torch.cat(parts, dim=-2)


def freivalds_judge(rt: Any, chk: Any, gm: Any, plan: list, args: list, compiled: list, what: str) -> None:
    """Check every planned output with two random sign vectors (see the module docstring)."""
    import torch

    from ..compare import FAIL, PASS, Verdict

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(out_node.args[0]) if isinstance(out_node.args[0], (list, tuple)) else [out_node.args[0]]
    env: dict = {n: a for n, a in zip(placeholders, args)}
    env["__gm__"] = gm
    for o, c in zip(outs, compiled):
        if hasattr(o, "op"):
            env[o] = c
    worst = None
    g = torch.Generator(device="cpu").manual_seed(rt.stats.checks)
    with torch.no_grad():
        for i, o, a_node, b_node, bias_node, flipped in plan:
            c = compiled[i]
            a, b = _value(a_node, env), _value(b_node[0], env)
            if b_node[1]:  # linear's weight [N, K]
                b = b.transpose(-2, -1)
            if flipped:  # C = (A B)^T = B^T A^T (a bias of addmm: a row of A B, a column of C)
                if bias_node is not None:
                    continue
                a, b = b.transpose(-2, -1), a.transpose(-2, -1)
            if c.shape != (*a.shape[:-1], b.shape[-1]):  # (a reshape of the product: the same elements in order)
                c = c.reshape(*a.shape[:-1], b.shape[-1])
            n = b.shape[-1]
            x = (torch.randint(0, 2, (*b.shape[:-2], n, 2), generator=g) * 2 - 1).to(torch.float64).to(b.device)
            lhs = _matvec(c, x)
            rhs = _matvec(a, _matvec(b, x))
            if bias_node is not None:  # addmm: C = bias + A B, bias a row [N] (or a whole [M, N])
                bias = _value(bias_node, env)
                lhs = lhs - (_matvec(bias, x) if bias.dim() == 2 else (bias.to(torch.float64) @ x).reshape(1, -1))
            # the row's error sum_j e_ij x_j over random signs is about sqrt(sum_j e_ij^2): each |e_ij| at most
            # t (|A||B|)_ij, whose row norm Gaussian probes z estimate (E ((|A||B|) z)_i^2 = sum_j (|A||B|)_ij^2)
            z = torch.randn((*b.shape[:-2], n, 8), generator=g, dtype=torch.float64).to(b.device)
            probe = _matvec(a.abs(), _matvec(b.abs(), z))
            rms = probe.pow(2).mean(-1, keepdim=True).sqrt()
            K = a.shape[-1]
            u_out = _U.get(str(c.dtype), 2.0**-24)
            u_acc = 2.0**-24 if c.dtype != torch.float64 else 2.0**-53
            bound = 8 * (u_out + K * u_acc) * rms + 1e-30
            ratio = ((lhs - rhs).abs() / bound)
            r = float(ratio.max()) if ratio.numel() else 0.0
            if not (r == r) or r > 1.0:
                row = int(torch.nan_to_num(ratio, nan=float("inf")).reshape(-1, 2).max(dim=1).values.argmax())
                v = Verdict(FAIL, "mismatch", f"output {i} ({list(c.shape)}) fails Freivalds' check: row {row} of C x "
                                              f"differs from A (B x) by {r:.3g}x its bound (8 x rounding to "
                                              f"{str(c.dtype).replace('torch.', '')} and K={K} accumulations, "
                                              "x the row norm of |A| |B|)",
                            worst_ratio=r)
            else:
                v = Verdict(PASS, worst_ratio=r)
            if worst is None or (v.status == FAIL and worst.status != FAIL) or (v.worst_ratio or 0) > (worst.worst_ratio or 0):
                worst = v
            if v.status == FAIL:
                chk.verdict = v
                rt.diverged(chk, v, what=f"{what} (Freivalds' check of a call too large to copy)",
                            shape=list(c.shape), record={"hook": {"freivalds": {"output": i, "K": K}}},
                            tensors={"Cx": lhs.detach().cpu(), "ABx": rhs.detach().cpu()})
                return
    chk.verdict = worst


__all__ = ["inductor_capture", "inductor_judge", "freivalds_plan", "freivalds_judge", "sample_rows"]
