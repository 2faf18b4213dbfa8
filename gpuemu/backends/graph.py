"""A compiled graph with a shadow: on a sampled call, the same FX graph runs eagerly in fp64 and in the
original dtypes, and the compiled outputs are judged against the fp64 ones.

The criterion follows torch._dynamo's accuracy minifier (``torch._dynamo.utils.same`` with an fp64
reference): the compiled result may be as far from fp64 as eager's own result is, times a multiplier
(2, or 3 for fp16/bf16), plus the calibrated tolerance. Per output element::

    allowed_i = atol + rtol * max(|ref_i|, rms(ref)) + M * (|eager_i - ref_i| + rms(eager - ref))

with (rtol, atol) the rule pack's default tolerance for the output's dtype. The eager terms make the
bound follow the graph's own conditioning (a cancelling sum is allowed what eager needed); the rms
terms keep one lucky eager element from making the bound too tight. Verdicts come from the one Oracle
(:func:`gpuemu.judge.judge_against`), so they read like every other failure.

Graphs that draw random numbers (dropout, rand*) are not checked: an eager re-run draws other numbers.
Only floating outputs are judged; integer and bool outputs are left alone.

Two kinds of graph are shadowed. With Inductor (and ``aot_eager``) as the inner backend, AOTAutograd's
*forward*, *backward* and *inference* graphs are (:class:`AotGraphShadow`): the aten graph is copied
before Inductor compiles it, and a sampled call runs the copy eagerly in fp64 (autocast off: the aten
graph already holds autocast's casts) on the call's own inputs — for a backward graph, the saved
tensors and the incoming gradients. With any other inner backend, Dynamo's graph is
(:class:`ShadowedGraph`, forward only). Large outputs are judged on their device: every element's
error against its bound is computed there, and the ``SKETCH_K`` elements nearest to or over their bound
go through the Oracle (the count over the bound is of all elements; :func:`gpuemu.judge.judge_against`),
so a check moves kilobytes, not the activations, to the CPU.

Between samples a graph runs no gpuemu code: an Inductor graph's ``current_callable`` is Inductor's own
while the hook is disarmed and the shadow's only while armed (:func:`arm_all` / :func:`disarm_all`).
With CUDA graphs (``mode="reduce-overhead"``) the replay happens inside that callable, so the graph is
still checked as a whole; its kernels, replayed by the CUDA graph, are not checked one by one, and each
such checked call says so in ``skip_reasons``.

A call whose inputs are too large to copy (past ``max_capture_bytes``) is not re-run whole
(:func:`_large_capture`): its matrix-product outputs get Freivalds' check (gpuemu/hook/large.py) and its
row-local outputs a re-run on sampled rows (gpuemu/backends/row_local.py, :func:`_rows_judge`).
"""

from __future__ import annotations

import weakref
from typing import Any

from ..judge import MULTIPLIER, graph_scale, judge_outputs  # noqa: F401 (the one judge; re-exported)

CUDAGRAPH_NOTE = "inductor kernels replayed by a CUDA graph: checked as part of their graph, not one by one"

_RANDOM_WORDS = ("dropout", "rand", "bernoulli", "normal_", "uniform", "multinomial", "poisson", "exponential_",
                 "geometric_", "cauchy_", "log_normal_", "rrelu", "randperm")


def random_nodes(gm: Any) -> list[str]:
    """Names of the nodes of ``gm`` that draw random numbers (an eager re-run would differ)."""
    out = []
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method"):
            continue
        name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))
        name = str(name).lower()
        if "scaled_dot_product" in name:  # fused attention draws random numbers only with dropout
            p = n.kwargs.get("dropout_p", next((a for a in n.args[3:6] if isinstance(a, float)), 0.0))
            if isinstance(p, (int, float)) and p > 0:
                out.append(n.name)
            continue
        if not any(w in name for w in _RANDOM_WORDS):
            continue
        if "dropout" in name:
            p = n.kwargs.get("p", n.args[1] if len(n.args) > 1 else 0.5)
            training = n.kwargs.get("training", n.args[2] if len(n.args) > 2 else True)
            if training is False or p == 0:
                continue
        out.append(n.name)
    return out


def flat_outputs(out: Any) -> list[Any]:
    """A graph's outputs as a flat list (Dynamo graphs return a tuple or list)."""
    if isinstance(out, (list, tuple)):
        flat: list[Any] = []
        for o in out:
            flat.extend(flat_outputs(o))
        return flat
    return [out]


# ---------------------------------------------------------------------------------------------- arming

_live: "weakref.WeakSet[Any]" = weakref.WeakSet()


def arm_all() -> None:
    """Put the shadow in front of every live graph (the hook is armed)."""
    for g in list(_live):
        g.arm()


def disarm_all() -> None:
    """Give every live graph back its compiled callable (the hook is disarmed)."""
    for g in list(_live):
        g.disarm()


def _armed_runtime() -> Any:
    from ..hook import runtime

    rt = runtime._current
    return rt if rt is not None and rt.arming.armed else None


class ShadowedGraph:
    """What the ``gpuemu`` backend returns: the inner backend's compiled callable plus a sampled shadow.

    Calls go to the compiled callable and return exactly its result; a sampled call also runs the
    shadow (see the module docstring). ``gm`` is a private copy of the graph taken before the inner
    backend saw it (Inductor's passes rewrite graphs in place).
    """

    def __init__(self, compiled: Any, gm: Any, *, inner: str, label: str) -> None:
        self.compiled = compiled
        self.gm = gm
        self.inner = inner
        self.label = label
        self.random = random_nodes(gm) if gm is not None else []
        # Dynamo's generated code calls the backend's callable with positional inputs, always (an inner
        # result's ``_boxed_call`` attribute is AOTAutograd's convention for its own fw compilers)
        self._site: Any = None
        self._rt: Any = None
        from ..hook import runtime

        self._runtime_mod = runtime

    def __call__(self, *call_args: Any) -> Any:
        rt = self._runtime_mod._current
        if rt is None or self.gm is None or not rt.arming.armed:  # between samples: one attribute read
            return self.compiled(*call_args)
        return self._slow(rt, call_args)

    def _slow(self, rt: Any, call_args: tuple) -> Any:
        import torch

        from ..hook.pipeline import run_check
        from ..hook.sampling import busy

        if busy():
            return self.compiled(*call_args)
        args = call_args
        try:
            if self._site is None or self._rt is not rt:
                self._site = rt.site(("graph", id(self)), self.label, "graph forward")
                self._rt = rt
                self._site.sig = next((i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
                                       and not isinstance(a, torch.nn.Parameter)), None)
            site = self._site
            sig = args[site.sig] if site.sig is not None else None
            sample, key = rt.decide(site, sig)
        except Exception as e:
            rt.internal_error("torch.compile/sample", e)
            return self.compiled(*call_args)
        if not sample:
            return self.compiled(*call_args)
        dtype, capture_ = _graph_capture(rt, args, self.random, self.gm)

        return run_check(rt, source="torch.compile", name=self.label, kind="graph", op=None, dtype=dtype,
                         bucket=key[1], capture=capture_, call=lambda: self.compiled(*call_args),
                         judge=lambda chk, pre, out: self._judge(rt, chk, args, pre, out), nested=True)

    def _judge(self, rt: Any, chk: Any, args: tuple, pre: dict, out: Any) -> None:
        import torch

        from .fp64 import Fp64Mode, to_fp64

        if pre.get("__large__"):  # a call too large to copy: Freivalds and sampled rows (_large_judge)
            return _large_judge(rt, chk, self, pre, args, flat_outputs(out))
        inputs = [pre.get(str(i), a) for i, a in enumerate(args)]
        with torch.no_grad():
            if getattr(self, "_gm64", None) is None:
                self._gm64 = _fp64_copy(self.gm)
            gm64 = self._gm64
            in64 = [to_fp64(x) for x in inputs]
            with Fp64Mode():
                ref = flat_outputs(gm64(*in64))
            eager = flat_outputs(self.gm(*inputs))
        compiled = flat_outputs(out)
        verdict, idx, notes = judge_outputs(compiled, ref, eager, rt.tolerances)
        if verdict is None:
            chk.skip("no floating output to judge")
            return
        chk.verdict = verdict
        if verdict.status != "fail":
            return
        record, tensors = _divergence_record(self.gm, {"inner": self.inner, "label": self.label, "output_index": idx,
                                                       "notes": notes}, inputs, compiled, scalars=True)
        c = compiled[idx]
        rt.diverged(chk, verdict, what=f"compiled {self.label} output {idx} vs fp64 eager "
                                       f"(inner backend {self.inner})",
                    shape=list(c.shape), record=record, tensors=tensors)


class AotGraphShadow:
    """The shadow of one AOTAutograd graph (forward, backward or inference) compiled by the inner backend.

    ``compiled`` is what the inner compiler returned: Inductor's OutputCode, whose ``current_callable``
    is swapped while the hook is armed (see the module docstring), or a boxed callable (``aot_eager``),
    which :meth:`boxed` wraps. ``gm`` is a copy of the aten graph taken before the compiler saw it.
    """

    def __init__(self, compiled: Any, gm: Any, *, kind: str, inner: str, label: str, cudagraphs: bool = False,
                 donated: frozenset = frozenset()) -> None:
        self.compiled = compiled
        self.gm = gm
        self.kind = kind  # graph.forward | graph.backward
        self.overwritten = overwritten_inputs(gm, donated)  # inputs the compiled call may change (see the function)
        self.inner = inner
        self.label = f"{label} {kind.split('.')[1]}"
        self.cudagraphs = cudagraphs
        self.random = random_nodes(gm)
        self._site: Any = None
        self._rt: Any = None
        self._gm64: Any = None
        self.original = getattr(compiled, "current_callable", None)
        self.swappable = self.original is not None
        self._armed_fn = self._make_armed()
        _live.add(self)
        if _armed_runtime() is not None:
            self.arm()

    def arm(self) -> None:
        if self.swappable and self.compiled.current_callable is self.original:
            self.compiled.current_callable = self._armed_fn

    def disarm(self) -> None:
        if self.swappable and self.compiled.current_callable is self._armed_fn:
            self.compiled.current_callable = self.original

    def boxed(self) -> Any:
        """For a compiler whose result is a plain boxed callable: a wrapper that checks when armed."""
        compiled, armed_fn = self.compiled, self._armed_fn

        def call(args: Any) -> Any:
            if _armed_runtime() is None:
                return compiled(args)
            return armed_fn(args)

        call._boxed_call = True  # type: ignore[attr-defined]
        return call

    def _make_armed(self) -> Any:
        def armed(inputs: Any) -> Any:
            real = self.original if self.swappable else self.compiled
            rt = _armed_runtime()
            if rt is None:
                return real(inputs)
            return self._slow(rt, real, inputs)

        return armed

    def _slow(self, rt: Any, real: Any, inputs: Any) -> Any:
        import torch

        from ..hook.pipeline import label, run_check
        from ..hook.sampling import busy

        if busy():
            return real(inputs)
        args = list(inputs)  # the compiled callable clears its (boxed) argument list
        try:
            if self._site is None or self._rt is not rt:
                self._site = rt.site(("graph", id(self)), self.label, label("torch.compile", self.kind))
                self._rt = rt
                tensors_at = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
                self._site.sig = next((i for i in tensors_at if not isinstance(args[i], torch.nn.Parameter)),
                                      tensors_at[0] if tensors_at else None)
            site = self._site
            sig = args[site.sig] if site.sig is not None and site.sig < len(args) else None
            sample, key = rt.decide(site, sig)
        except Exception as e:
            rt.internal_error(f"torch.compile/{self.kind}/sample", e)
            return real(inputs)
        if not sample:
            return real(inputs)
        if self.cudagraphs:
            rt.stats.skip_reasons[CUDAGRAPH_NOTE] = rt.stats.skip_reasons.get(CUDAGRAPH_NOTE, 0) + 1
        dtype, capture_ = _graph_capture(rt, args, self.random, self.gm, self.overwritten)

        return run_check(rt, source="torch.compile", name=self.label, kind=self.kind, op=None, dtype=dtype,
                         bucket=key[1], capture=capture_, call=lambda: real(inputs),
                         judge=lambda chk, pre, out: self._judge(rt, chk, args, pre, out), nested=True)

    def _judge(self, rt: Any, chk: Any, args: list, pre: dict, out: Any) -> None:
        import torch

        from .fp64 import Fp64Mode, to_fp64

        if pre.get("__large__"):  # a call too large to copy: Freivalds and sampled rows (_large_judge)
            return _large_judge(rt, chk, self, pre, args, flat_outputs(out))
        inputs = [pre.get(str(i), a) for i, a in enumerate(args)]
        with torch.no_grad(), _no_autocast():
            if self._gm64 is None:
                self._gm64 = _fp64_copy(self.gm)
            in64 = [to_fp64(x) for x in inputs]
            mode = Fp64Mode()
            with mode:
                ref = flat_outputs(self._gm64(*in64))
            eager = flat_outputs(self.gm(*inputs))
            spread = _spread(self.gm, inputs, eager)
        compiled = flat_outputs(out)
        verdict, idx, notes = judge_outputs(compiled, ref, eager, rt.tolerances, skip=mode.aux, spread=spread)
        if verdict is None:
            chk.skip("no floating output to judge")
            return
        chk.verdict = verdict
        if verdict.status != "fail":
            return
        record, tensors = _divergence_record(self.gm, {"inner": self.inner, "label": self.label, "graph_kind": self.kind,
                                                       "output_index": idx, "notes": notes}, inputs, compiled)
        c = compiled[idx]
        rt.diverged(chk, verdict, what=f"compiled {self.label} output {idx} vs fp64 eager "
                                       f"(inner backend {self.inner})",
                    shape=list(c.shape), record=record, tensors=tensors)


def _no_autocast() -> Any:
    """Autocast off on every device: an aten graph already holds the casts autocast made when it was traced."""
    import contextlib

    import torch

    stack = contextlib.ExitStack()
    for dev in ("cpu", "cuda"):
        try:
            stack.enter_context(torch.autocast(dev, enabled=False))
        except Exception:  # a device type this build lacks
            pass
    return stack


def graph_copy(gm: Any) -> Any:
    """A GraphModule over a fresh copy of ``gm``'s graph (compilers rewrite graphs in place)."""
    import torch.fx

    g = torch.fx.Graph()
    out = g.graph_copy(gm.graph, {})
    g.output(out)
    return torch.fx.GraphModule(gm, g)


def _fp64_copy(gm: Any) -> Any:
    """A copy of ``gm`` whose floating constants are float64 (its parameters are lifted inputs).

    Built from a fresh copy of the graph over its constants, not a deepcopy: an aten graph's node metadata
    holds fake tensors, and deep-copying them costs more than the check itself.
    """
    import copy
    import operator

    import torch

    if any(n.op == "call_module" for n in gm.graph.nodes):
        g = copy.deepcopy(gm)
        for mod in g.modules():
            for name, buf in list(mod._buffers.items()):
                if buf is not None and buf.is_floating_point():
                    mod._buffers[name] = buf.to(torch.float64)
            for name, p in list(mod._parameters.items()):
                if p is not None and p.is_floating_point():
                    mod._parameters[name] = torch.nn.Parameter(p.detach().to(torch.float64), requires_grad=False)
        for name, v in list(vars(g).items()):
            if isinstance(v, torch.Tensor) and v.is_floating_point():
                setattr(g, name, v.to(torch.float64))
        return g
    root: dict = {}
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            v = operator.attrgetter(n.target)(gm)
            if isinstance(v, torch.Tensor) and v.is_floating_point():
                v = v.detach().to(torch.float64)
            root[n.target] = v
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    return torch.fx.GraphModule(root, graph)


def overwritten_inputs(gm: Any, donated: frozenset = frozenset()) -> frozenset:
    """Indices of ``gm``'s inputs that its compiled call may leave changed: those it mutates (an in-place op or
    ``copy_`` into a placeholder: an optimizer step, a running statistic) and, in a backward, the saved
    activations AOTAutograd donates to Inductor (``bw_donated_idxs``), whose buffers Inductor reuses for its own
    values. Measured on the CPU (a Llama backward): five donated inputs changed by the call, and Freivalds' check,
    reading them after it, reported a correct weight gradient 3,180x off."""
    out = set(donated)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, p in enumerate(placeholders):
        for u in p.users:
            schema = getattr(u.target, "_schema", None)
            if schema is not None and schema.is_mutable and u.args and u.args[0] is p:
                out.add(i)
    return frozenset(out)


def _graph_capture(rt: Any, args: Any, random: list, gm: Any = None,
                   overwritten: frozenset = frozenset()) -> tuple[str, Any]:
    """A graph call's dtype label (its first float argument's) and the capture step of its check: the
    tensor arguments copied, unless the graph draws random numbers (an eager re-run would differ) or the
    copies would exceed ``max_capture_bytes``: then :func:`_large_capture` decides."""
    import torch

    from ..hook.capture import capture, storage_bytes
    from ..compare import dtype_label

    first_float = next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
    dtype = dtype_label(first_float.dtype if first_float is not None else None)
    tensors = {str(i): a for i, a in enumerate(args) if isinstance(a, torch.Tensor)}

    device = first_float.device if first_float is not None else None

    def capture_(chk):
        if random:
            chk.skip(f"graph draws random numbers ({', '.join(random[:3])}): an eager re-run would differ")
        elif storage_bytes(tensors.values()) * 3 > rt.settings.max_capture_bytes:
            return _large_capture(rt, chk, gm, device, "graph inputs exceed max_capture_bytes", list(args), overwritten)
        elif _rerun_refused(rt, gm, device):
            return _large_capture(rt, chk, gm, device, "the graph's fp64 re-run exceeds max_scratch_bytes", list(args),
                                  overwritten)
        else:
            return capture(tensors)
        return None

    return dtype, capture_


_whole_peaks: "weakref.WeakKeyDictionary[Any, int | None]" = weakref.WeakKeyDictionary()  # gm -> bytes


def _rerun_refused(rt: Any, gm: Any, device: Any) -> bool:
    """Whether re-running the whole of ``gm`` in fp64 would hold more scratch than a check may
    (:func:`gpuemu.hook.large.scratch_refused`: ``max_scratch_bytes``, and on CUDA a quarter of the free memory): small
    inputs can make huge intermediates (a language model's logits). Such a call is judged as one too large to copy:
    on sampled rows, or by Freivalds' check."""
    from ..hook.large import scratch_refused
    from .row_local import whole_peak_bytes

    if gm is None:
        return False
    if gm not in _whole_peaks:
        _whole_peaks[gm] = whole_peak_bytes(gm)
    need = _whole_peaks[gm]
    return need is not None and scratch_refused(rt, need, device, what="the graph's fp64 re-run") is not None


_row_plans: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()  # gm -> (cap, plan, fp64 copy)


def _row_plan(gm: Any, cap: int, device: Any = None) -> tuple[Any, Any]:
    """(the sampled-rows plan of ``gm`` or why there is none, its restricted graph in fp64), once per graph.
    The rows sampled are as many as fit ``cap`` (``max_scratch_bytes``) and, on CUDA, a quarter of the device's
    free memory when the plan is made (up to :data:`gpuemu.hook.large.ROWS`; each call checks the plan's bytes
    against the free memory again, :func:`gpuemu.hook.large.scratch_refused`)."""
    from .row_local import plan_rows

    hit = _row_plans.get(gm)
    if hit is None or hit[0] != cap:
        budget = cap
        if device is not None and getattr(device, "type", None) == "cuda":
            import torch

            free, _ = torch.cuda.mem_get_info(device)
            free += max(0, torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
            budget = min(cap, free // 4)
        plan = plan_rows(gm, cap_bytes=budget)
        hit = _row_plans[gm] = (cap, plan, None if isinstance(plan, str) else _fp64_copy(plan.gm))
    return hit[1], hit[2]


def _large_capture(rt: Any, chk: Any, gm: Any, device: Any = None,
                   why: str = "graph inputs exceed max_capture_bytes", args: list | None = None,
                   overwritten: frozenset = frozenset()) -> dict | None:
    """The capture step of a graph call too large to copy: nothing is copied; the outputs that are matrix
    products of tensors at hand get Freivalds' check (gpuemu/hook/large.py), the row-local ones a re-run on
    sampled rows (gpuemu/backends/row_local.py); a graph with neither is a skip reason that says why."""
    from ..hook.large import freivalds_plan
    from ..telemetry import ATTR_CHECK

    fplan = freivalds_plan(gm) if gm is not None else []
    try:
        rplan, gm64 = _row_plan(gm, rt.settings.max_scratch_bytes, device) if gm is not None else ("no graph", None)
    except Exception as e:  # gpuemu's own failure: counted, and Freivalds' check still runs
        rt.internal_error("torch.compile/rows/plan", e)
        rplan, gm64 = f"row analysis failed ({type(e).__name__})", None
    copies: dict = {}
    before: dict | None = None
    if overwritten and gm is not None:  # (read after the call, they must be copied or evaluated before it)
        fplan, rplan, copies, before = _spare_overwritten(rt, gm, fplan, rplan, gm64, args or [], overwritten, device)
    if isinstance(rplan, str) and not fplan:
        chk.skip(f"{why} (no output is a matrix product of tensors at hand; {rplan})")
        return None
    pre: dict = {"__large__": True, "__copies__": copies, "__before__": before}
    if fplan:
        pre["__freivalds__"] = fplan
    if not isinstance(rplan, str):
        pre["__rows__"] = (rplan, gm64)
    rows = "rows" if "__rows__" not in pre or not _sums_rows(rplan) else "chunks"
    kind = f"graph.freivalds+{rows}" if fplan and "__rows__" in pre else "graph.freivalds" if fplan else f"graph.{rows}"
    chk.kind = chk.attrs[ATTR_CHECK] = kind
    return pre


def _spare_overwritten(rt: Any, gm: Any, fplan: list, rplan: Any, gm64: Any, args: list, overwritten: frozenset,
                       device: Any) -> tuple[list, Any, dict, dict | None]:
    """(Freivalds' plan, the rows plan, copies by input index, what the rows' check evaluated before the call) for a
    large call whose compiled code may change inputs ``overwritten`` (:func:`overwritten_inputs`): the ones the
    checks read are copied before the call when together they fit ``max_capture_bytes``. Else the rows' check runs
    its evaluation before the call (within its scratch bound): the sums over the rows, and the last chunk's values
    kept for its row-local outputs; Freivalds' products that read them are dropped. What is dropped is counted in
    ``stats()["outputs_unchecked"]`` with why."""
    from ..hook.capture import capture, storage_bytes
    from ..hook.large import scratch_refused
    from .row_local import _flat

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    index = {p: i for i, p in enumerate(placeholders)}

    def reads(nodes: list) -> set:
        seen, stack, out = set(), [n for n in nodes if hasattr(n, "op")], set()
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if n.op == "placeholder":
                out.add(index[n])
            stack.extend(a for a in _flat(list(n.args) + list(n.kwargs.values())) if hasattr(a, "op"))
        return out

    f_reads = [reads([e[2], e[3][0], e[4]]) & overwritten for e in fplan]
    r_reads: set = set()
    if not isinstance(rplan, str):
        rph = [n for n in rplan.gm.graph.nodes if n.op == "placeholder"]
        r_reads = {i for i, p in enumerate(rph[:len(placeholders)]) if p.users} & overwritten
    need = set().union(r_reads, *f_reads)
    if not need:
        return fplan, rplan, {}, None
    picked = {str(i): args[i] for i in sorted(need) if i < len(args)}
    if storage_bytes(picked.values()) <= rt.settings.max_capture_bytes:
        return fplan, rplan, capture(picked), None
    over = (f"graph input{'s' if len(need) > 1 else ''} {', '.join(str(i) for i in sorted(need))}, which the "
            "compiled call overwrites (a donated buffer or an in-place update), and copying them before the call "
            "exceeds max_capture_bytes")
    st = rt.stats
    kept = [e for e, r in zip(fplan, f_reads) if not r]
    why = f"a matrix product that reads {over}"
    for _ in range(len(fplan) - len(kept)):
        st.outputs_unchecked[why] = st.outputs_unchecked.get(why, 0) + 1
    before = None
    if r_reads:
        refused = scratch_refused(rt, rplan.est_bytes, device, what="sampled rows")
        if refused:
            why = f"the sampled rows' check reads {over}, and {refused}"
            for _ in rplan.outputs:
                st.outputs_unchecked[why] = st.outputs_unchecked.get(why, 0) + 1
            return kept, why, {}, None
        before = _evaluate_before(rplan, gm64, args, _chunks(rt, rplan), device, need)
    return kept, rplan, {}, before


def _evaluate_before(plan: Any, gm64: Any, args: list, chunks: list, device: Any, overwritten: set) -> dict:
    """The rows' check's evaluation, run before a call that overwrites inputs it reads: the sums over the rows and
    the last chunk's values (its inputs copied where they are the overwritten inputs themselves, for the record)."""
    import torch

    kept: dict = {}

    def keep_last(idx: list, inputs: list, ref: list, eager: list, spread: Any, aux64: set) -> bool:
        if idx is chunks[-1]:
            own = [x.clone() if isinstance(x, torch.Tensor) and i in overwritten and x is args[i] else x
                   for i, x in enumerate(inputs)]
            kept["v"] = (idx, own, ref, eager, spread, set(aux64))
        return False

    sums = _evaluate_chunks(plan, gm64, args, chunks, device, keep_last)
    return {"chunks": chunks, "sums": sums, "kept": kept.get("v")}


def _sums_rows(plan: Any) -> bool:
    from .row_local import SUM

    return any(k is SUM for k in plan.outputs.values())


def _large_judge(rt: Any, chk: Any, shadow: Any, pre: dict, args: Any, compiled: list) -> None:
    """Freivalds' check, then the sampled rows' (the worst verdict stands; the first divergence ends it), on the
    copies taken before the call of the inputs it may overwrite."""
    copies = pre.get("__copies__") or {}
    args = [copies.get(str(i), a) for i, a in enumerate(args)]
    if "__freivalds__" in pre:
        from ..hook.large import freivalds_judge

        freivalds_judge(rt, chk, shadow.gm, pre["__freivalds__"], list(args), compiled, shadow.label)
        if chk.divergence is not None:
            return
    if "__rows__" in pre:
        _rows_judge(rt, chk, shadow, *pre["__rows__"], list(args), compiled, pre.get("__before__"))


def _restricted(plan: Any, args: list, idx: list, device: Any) -> list:
    """The restricted graph's inputs for rows ``idx``."""
    import torch

    from .row_local import take_rows

    inputs = [take_rows(a, k, idx, plan.n_rows) if isinstance(a, torch.Tensor) else a
              for a, k in zip(args, plan.inputs)]
    if plan.takes_rows:  # (the restricted graph takes rows of values it computes whole)
        inputs.append(torch.as_tensor(idx, dtype=torch.int64, device=device))
    return inputs


def _chunks(rt: Any, plan: Any) -> list:
    """The rows evaluated: every row in chunks of ``plan.m`` when outputs sum over the rows, else sampled ones."""
    from ..hook.large import sample_rows

    if _sums_rows(plan):
        return [list(range(c, c + plan.m)) for c in range(0, plan.n_rows, plan.m)]
    return [sample_rows(plan.n_rows, seed=rt.stats.checks + plan.n_rows, count=plan.m)]


def _evaluate_chunks(plan: Any, gm64: Any, args: list, chunks: list, device: Any,
                     on_chunk: Any = None) -> tuple[dict, dict, dict, set]:
    """The restricted graph on each chunk of rows, in fp64 and as the control (and its one-ulp spread): the
    outputs that sum over the rows added up in fp64 over the chunks, returned as (reference sums, control sums,
    spread sums, outputs the fp64 run could not compute); each chunk's values go to ``on_chunk(rows, inputs, ref,
    eager, spread, aux)`` first, which ends the evaluation by returning True. One chunk's values are alive at a
    time, as the plan's byte bound counts."""
    import torch

    from .fp64 import Fp64Mode, to_fp64
    from .row_local import SUM

    sums = [j for j, k in enumerate(plan.outputs.values()) if k is SUM]
    ref_sum: dict = {}
    eager_sum: dict = {}
    spread_sum: dict = {}
    aux: set = set()
    for idx in chunks:
        with torch.no_grad(), _no_autocast():
            inputs = _restricted(plan, args, idx, device)
            mode = Fp64Mode()
            with mode:
                ref = flat_outputs(gm64(*[to_fp64(x) for x in inputs]))
            eager = flat_outputs(plan.gm(*inputs))
            spread = _spread(plan.gm, inputs, eager)
            for j in sums:
                if id(ref[j]) in mode.aux:
                    aux.add(j)
                if isinstance(ref[j], torch.Tensor) and isinstance(eager[j], torch.Tensor):
                    r64, e64 = ref[j].to(torch.float64), eager[j].to(torch.float64)
                    ref_sum[j] = r64 if j not in ref_sum else ref_sum[j] + r64
                    eager_sum[j] = e64 if j not in eager_sum else eager_sum[j] + e64
                    if spread is not None and spread[j] is not None:
                        spread_sum[j] = spread[j] if j not in spread_sum else spread_sum[j] + spread[j]
            stop = on_chunk is not None and on_chunk(idx, inputs, ref, eager, spread, mode.aux)
        del ref, eager, spread, inputs  # (one chunk's values alive at a time)
        if stop:
            break
    return ref_sum, eager_sum, spread_sum, aux


def _rows_judge(rt: Any, chk: Any, shadow: Any, plan: Any, gm64: Any, args: list, compiled: list,
                before: dict | None = None) -> None:
    """The compiled row-local outputs at sampled rows against the graph evaluated on those rows of its inputs
    (in fp64, and in the original dtypes as the control), by the graph judge. A plan with outputs that sum over
    the rows (a backward's weight gradients) evaluates every row instead, in chunks of ``plan.m``: the row-local
    outputs are judged chunk by chunk (on the last chunk only when ``before`` holds the evaluation made before a call
    that overwrites its inputs: :func:`_evaluate_before`), the sums once, against the chunks' shares added up in
    fp64. Outputs that
    are neither (a mean loss over every row) are counted in ``stats()["outputs_unchecked"]`` by reason, and in the
    check's ``gpuemu.outputs_unchecked`` attribute."""
    import torch

    from ..compare import FAIL, PASS
    from ..hook.large import scratch_refused
    from .row_local import SUM, take_rows

    prior = chk.verdict  # (Freivalds', when the graph also has matrix-product outputs)
    st = rt.stats
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
    before = before or {}
    why = scratch_refused(rt, plan.est_bytes, device, what="sampled rows") if "sums" not in before else None
    if any(isinstance(a, torch.Tensor) and want is not None and tuple(a.shape) != want
           for a, want in zip(args, plan.shapes)):
        why = "graph inputs' shapes differ from the traced graph's (no sampled rows)"
    if why and prior is None:
        chk.skip(why)
        return
    unchecked = dict(plan.unchecked) if not why else {i: why for i in [*plan.outputs, *plan.unchecked]}
    for reason in unchecked.values():
        st.outputs_unchecked[reason] = st.outputs_unchecked.get(reason, 0) + 1
    chk.attrs["gpuemu.outputs_unchecked"] = len(unchecked)
    if why:  # (Freivalds' verdict stands; the row-local outputs are counted as unchecked, with why)
        return
    states = list(plan.outputs.values())
    sums = [j for j, k in enumerate(states) if k is SUM]
    rows = [j for j, k in enumerate(states) if k is not SUM]
    chunks = before.get("chunks") or _chunks(rt, plan)
    worst = None  # (verdict, index into plan.outputs, notes, rows, inputs, compared outputs: kept for a failure only)

    def judge_rows(idx: list, inputs: list, ref: list, eager: list, spread: Any, aux64: set) -> bool:
        """The row-local outputs at rows ``idx``; True when a failure ends the evaluation."""
        nonlocal worst
        if not rows:
            return False
        got = [take_rows(compiled[i], k, idx, plan.n_rows) for i, k in plan.outputs.items() if k is not SUM]
        v, jj, notes = judge_outputs(got, [ref[j] for j in rows], [eager[j] for j in rows], rt.tolerances,
                                     skip=aux64, spread=None if spread is None else [spread[j] for j in rows])
        if v is not None and _worse(v, worst):
            worst = (v, rows[jj], notes, idx, inputs, got) if v.status == FAIL else (v, rows[jj], notes, idx)
        return worst is not None and worst[0].status == FAIL

    if "sums" in before:  # (evaluated before the call, which overwrites inputs it reads; the last chunk kept)
        ref_sum, eager_sum, spread_sum, aux = before["sums"]
        if before.get("kept"):
            judge_rows(*before["kept"])
    else:
        ref_sum, eager_sum, spread_sum, aux = _evaluate_chunks(plan, gm64, args, chunks, device, judge_rows)
    if sums and (worst is None or worst[0].status != FAIL):
        order = [j for j in sums if j in ref_sum and j not in aux]
        outs = list(plan.outputs)
        got = [compiled[outs[j]] for j in order]
        v, jj, notes = judge_outputs(got, [ref_sum[j] for j in order], [eager_sum[j] for j in order],
                                     rt.tolerances, spread=[spread_sum.get(j) for j in order] if spread_sum else None)
        if v is not None and _worse(v, worst):
            worst = (v, order[jj], dict(notes, sum_over_rows=True), "all", None, got)
    if worst is None:
        if prior is None:
            chk.skip("no floating output to judge")
        return
    verdict, j, notes, idx = worst[:4]
    if prior is not None and prior.status == PASS and verdict.status == PASS \
            and (prior.worst_ratio or 0) > (verdict.worst_ratio or 0):
        return
    chk.verdict = verdict
    if verdict.status != FAIL:
        return
    inputs, got = worst[4:]
    out_i = list(plan.outputs)[j]
    summed = idx == "all"
    if summed:  # (the record's inputs: the last chunk's, taken again; before the call when it overwrites them)
        inputs = before["kept"][1] if before.get("kept") else None
        if inputs is None:
            with torch.no_grad():
                inputs = _restricted(plan, args, chunks[-1], device)
    hook = {"inner": shadow.inner, "label": shadow.label, "graph_kind": getattr(shadow, "kind", "graph.forward"),
            "output_index": j, "graph_output_index": out_i, "rows": idx if not summed else list(chunks[-1]),
            "n_rows": plan.n_rows, "outputs_unchecked": {str(i): why for i, why in plan.unchecked.items()},
            "notes": notes}
    record, tensors = _divergence_record(plan.gm, hook, inputs, got, scalars=True)
    on = (f"every row of {plan.n_rows} (a sum over the rows, evaluated in chunks of {plan.m})" if summed
          else f"{len(idx)} sampled rows of {plan.n_rows}")
    rt.diverged(chk, verdict, what=f"compiled {shadow.label} output {out_i} vs fp64 eager on {on} "
                                   f"(a call too large to copy; inner backend {shadow.inner})",
                shape=list(compiled[out_i].shape), record=record, tensors=tensors)


def _spread(gm: Any, inputs: list, eager: list) -> list | None:
    """How far each fp32 output of the eager control moves when the graph's floating inputs move by one ulp
    (gpuemu.oracle.nudge_spread, one draw): added to the control's error in the bound, for outputs whose control
    happens to be exact where a compiled kernel's other order of summation is not (a tied embedding's gradient,
    the head's product plus the lookup's scatter, cancelling)."""
    import torch

    from ..oracle import nudge_spread

    return nudge_spread(lambda a: flat_outputs(gm(*a)), inputs, eager, draws=1)


def _worse(v: Any, worst: Any) -> bool:
    """Whether verdict ``v`` is worse than ``worst``'s (a failure, or a larger share of its bound)."""
    if worst is None:
        return True
    w = worst[0]
    if (v.status == "fail") != (w.status == "fail"):
        return v.status == "fail"
    return (v.worst_ratio or 0) > (w.worst_ratio or 0)


def _divergence_record(gm: Any, hook: dict, inputs: Any, compiled: list, *, scalars: bool = False) -> tuple[dict, dict]:
    """The stored record of a graph divergence and its tensors: the graph as JSON (or why it cannot be, and its
    code) with its constants, the inputs (``scalars``: the non-tensor ones too) and the compiled outputs."""
    import torch

    from .graph_io import graph_to_json

    record = {"hook": dict(hook)}
    tensors: dict = {f"in.{i}": x for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)}
    try:
        doc, consts = graph_to_json(gm)
        record["hook"]["graph"] = doc
        tensors.update(consts)
    except Exception as e:  # still a divergence; only the replay is lost
        record["hook"]["graph"] = None
        record["hook"]["graph_unsupported"] = f"{type(e).__name__}: {e}"
        record["hook"]["code"] = getattr(gm, "code", None)
    if scalars:
        record["hook"]["scalars"] = {str(i): a for i, a in enumerate(inputs)
                                     if isinstance(a, (int, float, bool)) or a is None}
    for i, c in enumerate(compiled):
        if isinstance(c, torch.Tensor):
            tensors[f"out.{i}"] = c.detach()
    return record, tensors
