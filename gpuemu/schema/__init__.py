"""Kernels judged against their PyTorch reference: the schema of a call, from example calls and a declaration.

    >>> import gpuemu
    >>> gpuemu.fuzz(my_kernel, reference=torch_fn, inputs=get_inputs)          # doctest: +SKIP

:func:`bind` turns (kernel, reference, example calls, declaration) into a :class:`Bound`: the inferred and
declared :class:`Schema`, an op (an :class:`~gpuemu.ops.OpSpec` registered under a name of its own, so cases,
the oracle, shrinking, hints, the store and replay treat it as any op of the registry) and the launcher the
fuzzer calls. The schema comes from :mod:`gpuemu.schema.infer`, corrections from :mod:`gpuemu.schema.declare`,
the calling conventions (plain functions, KernelBench modules) from :mod:`gpuemu.schema.calls`.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import InvalidArgument
from ..runners.cuda_on_cpu import cuda_on_cpu
from .calls import Call, ModuleCall, as_calls, call_function, is_module_class, match_params, slot_names, state_entries
from .model import Dim, Output, Schema

__all__ = ["Bound", "Schema", "Dim", "Output", "bind", "bind_record", "spec_of"]


@dataclass(frozen=True)
class Bound:
    """A kernel bound to its reference: ``launcher`` takes the schema's arguments, ``op`` names the registered
    op of ``schema``; ``reference``/``inputs`` are the targets to write into records (None for objects)."""

    launcher: Callable
    op: str
    schema: Schema
    reference: str | None
    inputs: str | None

    def record(self) -> dict:
        """What a stored failure needs to rebuild this binding on replay."""
        return {"reference": self.reference, "inputs": self.inputs, "schema": self.schema.to_dict()}


def _load(target: Any, what: str) -> Any:
    if isinstance(target, str):
        from ..target import load

        return load(target)
    return target


def _describe(obj: Any, target: Any) -> str | None:
    if isinstance(target, str):
        return target
    from ..target import describe

    try:
        return describe(obj)
    except Exception:  # noqa: BLE001 - an object without a name: records say so
        return None


def _module_constants(obj: Any) -> dict[str, int]:
    mod = inspect.getmodule(obj)
    if mod is None:
        return {}
    return {k: v for k, v in vars(mod).items() if type(v) is int and not k.startswith("_") and k.lower() == k
            or (type(v) is int and k.isupper() and not k.startswith("_"))}


def _user_call(fn: Callable, what: str, fix: str) -> Any:
    """``fn()``, the user's code: what it raises is a usage error in one line (what, and what to do)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the user's own code on the user's own example
        from ..errors import one_line

        raise InvalidArgument(f"{what} raised {one_line(e)}; {fix}") from None


def _find_inputs(reference: Any, what: str) -> tuple[Callable, str | None]:
    """The example-call function of the reference's module: get_examples, then get_inputs."""
    mod = inspect.getmodule(reference)
    for name in ("get_examples", "get_inputs"):
        fn = getattr(mod, name, None) if mod is not None else None
        if callable(fn):
            ref_t = _describe(reference, None)
            return fn, (ref_t.rsplit(":", 1)[0] + ":" + name) if ref_t else None
    raise InvalidArgument(f"{what} has no example call: pass --inputs FILE.py:FUNC (a function returning one call's "
                          "arguments), or define get_inputs() in the reference's file")


@cuda_on_cpu()  # (get_inputs() and ModelNew(...) written for a GPU, on a machine without one)
def bind(kernel: Any, *, reference: Any, inputs: Any = None, schema: Mapping[str, Any] | str | None = None,
         init_inputs: Any = None) -> Bound:
    """Bind ``kernel`` to ``reference`` (callables, classes or ``file.py:name`` targets) with the example call(s)
    ``inputs`` returns (default: the reference file's ``get_inputs``), corrected by the declaration ``schema``
    (a mapping, a YAML/JSON file, or the reference module's ``GPUEMU_SCHEMA``). An ``nn.Module`` class as the
    reference makes a KernelBench binding: ``kernel`` is then the ``ModelNew`` class, both built from
    ``init_inputs`` (default: the reference file's ``get_init_inputs``)."""
    from .declare import apply, load_declaration
    from .infer import infer

    ref_obj = _load(reference, "reference")
    ref_target = _describe(ref_obj, reference)
    if inputs is None:
        inputs_fn, inputs_target = _find_inputs(ref_obj, f"reference {ref_target or ref_obj!r}")
    else:
        inputs_fn = _load(inputs, "inputs")
        inputs_target = _describe(inputs_fn, inputs)
    where = inputs_target or "the inputs function"
    raw = _user_call(inputs_fn, where, "fix the inputs function") if callable(inputs_fn) else inputs_fn
    calls = as_calls(raw, where)
    declared = load_declaration(schema, ref_obj)
    constants = _module_constants(ref_obj)
    if is_module_class(ref_obj):
        return _bind_modules(kernel, ref_obj, ref_target, calls, inputs_target, declared, constants, init_inputs)
    if not callable(ref_obj):
        raise InvalidArgument(f"reference {ref_target or ref_obj!r} is not callable")
    names = slot_names(ref_obj, calls[0])
    keywords = list(calls[0].kwargs)
    sch = infer(ref_obj, calls, names=names, constants=constants, where=f"reference {ref_target or ''}".strip())
    sch = apply(sch, declared)
    launcher = _function_launcher(kernel, keywords, sch.write_positions())
    sch = _kernel_ties(sch, launcher, lambda s_: register(s_, ref_obj, keywords, ref_target))
    op = register(sch, ref_obj, keywords, ref_target)
    return Bound(launcher, op, sch, ref_target, inputs_target)


def _kernel_ties(sch: Schema, launcher: Callable, register_fn: Callable[[Schema], str]) -> Schema:
    """Dims that had one size in the example and that the reference takes apart, but the kernel does not (it
    raises, or returns other shapes than the reference, once they differ, and not while they are equal): one dim.
    The kernel's author made them one (a head dim for q, k and v; one page size for k and v caches); fuzzing them
    apart would report the kernel's design as its failure. Checked at small sizes on gpuemu's CPU runtime."""
    import torch

    from ..cases import Case, materialize
    from ..runners import run_launcher
    from .calls import flatten_outputs

    declared = set((sch.declared.get("dims") or {}))  # (a declared dim is kept, never merged away: its bounds hold)
    free = [d for d in sch.dims.values() if not d.fixed]
    pairs = [(a, b) if b.name not in declared else (b, a) for i, a in enumerate(free) for b in free[i + 1:]
             if a.example == b.example and not (a.name in declared and b.name in declared)]
    if not pairs:
        return sch
    op = register_fn(sch)
    from .. import ops

    spec = ops.get(op)

    def small(d: Dim) -> int:
        size = max(d.lo, min(d.example, 16))
        return size + (-size % d.multiple_of)

    def shapes_agree(dims: dict) -> bool | None:
        """The kernel's output shapes equal the reference's at ``dims`` (None: the reference cannot compute it)."""
        case = Case(op=op, dtype=sch.primary if sch.primary in ("fp32", "fp16", "bf16") else "fp32", dims=dims,
                    seed=0x5EED)
        if spec.check_dims(dims, {}) is not None:
            return None
        inputs, _ = materialize(case, "cpu")
        args = [inputs[a.name] for a in spec.args]
        try:
            want = [tuple(t.shape) for t in spec.eager(*args)]
        except Exception:  # noqa: BLE001 - outside the reference's domain
            return None
        got = run_launcher(launcher, args, {}, device="cpu")
        if got.error is not None:
            return False
        return [tuple(t.shape) for t in flatten_outputs(got.output) if isinstance(t, torch.Tensor)] == want

    ties: list[tuple[str, str]] = []
    base = {d.name: small(d) for d in sch.dims.values()}
    for a, b in pairs:
        if any(b.name in t for t in ties):
            continue
        apart = dict(base)
        apart[b.name] = base[a.name] + b.multiple_of if base[a.name] + b.multiple_of <= b.hi else max(
            b.lo, base[a.name] - b.multiple_of)
        together = dict(base)
        together[b.name] = base[a.name]
        if apart[b.name] == base[a.name] or shapes_agree(apart) is not False or shapes_agree(together) is not True:
            continue
        ties.append((a.name, b.name))
    for a, b in ties:
        sch = _merge(sch, a, b)
    return sch


def _merge(sch: Schema, keep: str, drop: str) -> Schema:
    """``sch`` with dim ``drop`` made ``keep`` everywhere."""
    import dataclasses

    def rename(x: str) -> str:
        for form in ("{}", "{}/2", "2*{}", "{}+1"):
            if x == form.format(drop):
                return form.format(keep)
        return x

    args = tuple(dataclasses.replace(a, shape=tuple(rename(x) for x in a.shape),
                                     index_of=keep if a.index_of == drop else a.index_of) for a in sch.args)
    dims = {k: v for k, v in sch.dims.items() if k != drop}
    k = dims[keep]
    why = f"one dim with {drop}: equal in the example, and the kernel takes no other sizes"
    dims[keep] = dataclasses.replace(k, why=f"{k.why}; {why}" if k.why else why)
    outputs = tuple(dataclasses.replace(o, shape=tuple(rename(x) for x in o.shape)) for o in sch.outputs)
    return sch.replace(args=args, dims=dims, outputs=outputs)


def _function_launcher(kernel: Any, keywords: list[str], writes: tuple[int, ...] = ()) -> Callable:
    """The kernel as the fuzzer calls it: the schema's arguments in order; where the reference writes arguments in
    place, the kernel writes copies of them, which are its outputs (``call_function``'s ``writes``)."""
    if not keywords and not writes:
        return kernel

    def launcher(*args: Any) -> Any:
        return call_function(kernel, args, keywords, writes)

    launcher.__name__ = getattr(kernel, "__name__", "kernel")
    launcher.__qualname__ = getattr(kernel, "__qualname__", launcher.__name__)
    launcher.__module__ = getattr(kernel, "__module__", "")
    with contextlib.suppress(AttributeError, TypeError):  # (a callable object: no __dict__ to carry)
        launcher.__dict__.update(vars(kernel))  # what is declared on the kernel (@gpuemu.requires) holds for it
    launcher.__wrapped__ = kernel  # type: ignore[attr-defined]
    return launcher


def _bind_modules(kernel: Any, ref_cls: type, ref_target: str | None, calls: list[Call], inputs_target: str | None,
                  declared: Mapping[str, Any], constants: Mapping[str, int], init_inputs: Any) -> Bound:
    from .calls import _fork_rng
    from .declare import apply
    from .infer import infer

    new_cls = kernel
    if not is_module_class(new_cls):
        raise InvalidArgument(f"the reference {ref_target} is an nn.Module class (a KernelBench problem): the kernel "
                              "must be one too (ModelNew), not a function")
    if init_inputs is None:
        mod = inspect.getmodule(ref_cls)
        fn = getattr(mod, "get_init_inputs", None)
        init = list(_user_call(fn, "get_init_inputs()", "fix the problem file")) if callable(fn) else []
    else:
        init = list(_user_call(init_inputs, "init_inputs()", "fix it") if callable(init_inputs) else init_inputs)
    with _fork_rng():
        model = _user_call(lambda: ref_cls(*init), f"{getattr(ref_cls, '__name__', 'Model')}(*get_init_inputs())",
                           "fix the reference module")
    params = state_entries(model)
    with _fork_rng():
        try:
            new = new_cls(*init)
        except Exception as e:  # noqa: BLE001
            from ..errors import one_line

            raise InvalidArgument(f"{getattr(new_cls, '__name__', new_cls)}(*get_init_inputs()) raised "
                                  f"{one_line(e)}; ModelNew takes Model's constructor arguments") from None
    mapping = dict(zip([n for n, _ in state_entries(new)], match_params(new, [(n, tuple(t.shape)) for n, t in params])))
    first = calls[0]
    try:
        init_names = [p for p in list(inspect.signature(ref_cls.__init__).parameters)[1:]]
    except (TypeError, ValueError):
        init_names = []
    init_names = [(init_names[i] if i < len(init_names) else f"init{i}") for i in range(len(init))]
    input_names = slot_names(ref_cls.forward, Call((None,) + tuple(first.args), first.kwargs))[1:]
    layout = {"inputs": input_names, "input_keywords": list(first.kwargs), "init": init_names,
              "params": [n for n, _ in params], "mapping": mapping}
    ref_call = ModuleCall(ref_cls, layout)
    # one example call of the combined function: forward inputs, constructor arguments, parameters
    full = [Call(tuple(c.args) + tuple(c.kwargs.values()) + tuple(init) + tuple(t.detach().clone() for _, t in params),
                 {}) for c in calls]
    names = list(input_names) + [f"init.{n}" for n in init_names] + [f"param.{n}" for n, _ in params]
    sch = infer(ref_call, full, names=names, constants=constants, call_kind="module", module=layout,
                where=f"reference {ref_target}", fixed_layouts=[f"param.{n}" for n, _ in params])
    sch = apply(sch, declared)
    op = register(sch, ref_call, [], ref_target)
    return Bound(ModuleCall(new_cls, layout, mapping=mapping), op, sch, ref_target, inputs_target)


def bind_record(record: Mapping[str, Any], kernel: Any) -> Bound:
    """The binding a stored failure was found with (its schema as stored; the reference imported again)."""
    info = record.get("bound") or {}
    sch = Schema.from_dict(info["schema"])
    ref_obj = _load(info["reference"], "reference") if info.get("reference") else None
    if ref_obj is None:
        raise InvalidArgument("this record's reference was a Python object with no importable name: replay it from "
                              "the script that bound it (gpuemu.reproduce(seed, fn=..., reference=...))")
    keywords = [a.name for a in sch.args if a.keyword] if sch.call == "function" else []
    if sch.call == "module":
        ref_call = ModuleCall(ref_obj, sch.module)
        op = register(sch, ref_call, [], info["reference"])
        return Bound(ModuleCall(kernel, sch.module, mapping=sch.module.get("mapping")), op, sch, info["reference"],
                     info.get("inputs"))
    op = register(sch, ref_obj, keywords, info["reference"])
    return Bound(_function_launcher(kernel, keywords, sch.write_positions()), op, sch, info["reference"],
                 info.get("inputs"))


def register(sch: Schema, reference: Callable, keywords: list[str], target: str | None) -> str:
    """Register the op of ``sch`` (reference-defined) in the op registry; returns its name (stable for the same
    reference target and schema: a record names it and replay registers it again)."""
    from .. import ops

    text = json.dumps(sch.to_dict(), sort_keys=True, default=str)
    tag = hashlib.sha256(f"{target}|{text}".encode()).hexdigest()[:10]
    base = (target or getattr(reference, "__qualname__", "reference")).rsplit(os.sep, 1)[-1]
    name = f"ref:{base}@{tag}"
    ops.register(spec_of(sch, reference, keywords, name, target))
    return name


def spec_of(sch: Schema, reference: Callable, keywords: list[str], name: str, target: str | None):
    """The registry record of a reference-defined op: its reference runs in float64 (gpuemu's fp64 mode), its
    ``eager`` form is the reference in the working dtype (the control)."""
    from ..ops import OpSpec

    roles = {n: d.role for n, d in sch.dims.items()}
    limits = {n: (d.lo, d.hi) for n, d in sch.dims.items()}
    multiples = {n: d.multiple_of for n, d in sch.dims.items() if d.multiple_of > 1}
    magnitude = "dot" if "contracted" in roles.values() else "sum" if "reduced" in roles.values() else "any"
    writes = sch.write_positions()
    said = (sch.declared or {}).get("dims") or {}  # a declared max (or a fixed size) bounds long rows too
    ceilings = {n: d.hi for n, d in sch.dims.items()
                if n in said and (not isinstance(said[n], Mapping) or "max" in said[n] or said[n].get("fixed"))}

    def run64(*args: Any) -> list:
        import torch

        from ..backends.fp64 import Fp64Mode
        from .calls import flatten_outputs

        with torch.no_grad(), Fp64Mode():
            out = call_function(reference, args, keywords, writes)
        return flatten_outputs(out)

    def control(*args: Any) -> list:
        import torch

        from .calls import flatten_outputs

        with torch.no_grad():
            return flatten_outputs(call_function(reference, args, keywords, writes))

    signature = f"{target or getattr(reference, '__qualname__', 'reference')}(" + ", ".join(a.name for a in sch.args) + ")"
    return OpSpec(
        name=name, signature=signature, meaning=f"the PyTorch reference {target or ''}".strip(),
        args=sch.args, dims=roles, reference=run64, error_scale=lambda inputs, kwargs, ref: ref.abs(),
        scale_doc="max(|ref|, rms(ref)) + M * (|eager - ref| + rms(eager - ref)) / rtol: the reference's own error "
                  "in the working dtype",
        dtypes=tuple({"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}.get(d, d) for d in sch.dtypes),
        magnitude=magnitude, dim_limits=limits, multiples=multiples, eager=control,
        eager_doc="the reference in the working dtype", schema=sch, max_elements=MAX_ELEMENTS, long_rows=ceilings)


MAX_ELEMENTS = 1 << 19  # a case's input elements, summed: 512K (a 512x512 GEMM's two operands, attention over
# 256 tokens of 8 heads of 64). The CPU runs what a GPU runs at a thousandth of its speed: past this a case of an
# attention kernel (work ~ tokens^2) ran past the 120 s case limit
