"""The ``gpuemu`` torch.compile backend: any inner backend (Inductor by default) plus a sampled fp64 shadow.

>>> model = torch.compile(model, backend="gpuemu")                                  # doctest: +SKIP
>>> model = torch.compile(model, backend="gpuemu", options={"backend": "aot_eager"})  # doctest: +SKIP

``options`` (validated): ``backend`` — the inner backend, a registered name or a callable (default
``"inductor"``); ``options`` — passed to the inner backend as its own ``options`` (Inductor config
patches). ``torch.compile(mode=...)`` reaches the inner backend unchanged. The compiled code is exactly
the inner backend's, so results are bit for bit those of ``torch.compile(backend=inner)``.

With ``inductor`` (and ``aot_eager``) the backend hooks in between AOTAutograd and the graph compiler
(``compile_fx(inner_compile=...)``; ``aot_eager(fw_compiler=..., bw_compiler=...)``), so forward,
backward and inference graphs are each shadowed (:class:`gpuemu.backends.graph.AotGraphShadow`).
AOTAutograd's cache is bypassed for these compiles: a cache hit would skip the compiler and leave the
graph unshadowed. Any other inner backend gets the forward-only Dynamo-graph shadow.

The backend is registered under the name ``gpuemu`` by ``import gpuemu.hook`` (only if that name is not
registered yet: Dynamo asserts on duplicates) and through the ``torch_dynamo_backends`` entry point.
Importing this package installs nothing; the first compile imports :mod:`gpuemu.hook`, which installs
the hook from the environment and ``gpuemu.yaml`` (``GPUEMU_MODE=off`` keeps it passive).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..errors import InvalidArgument

NAME = "gpuemu"
OPTION_KEYS = ("backend", "options")


def parse_options(options: Mapping[str, Any] | None) -> tuple[Any, dict | None]:
    """(inner backend, inner options) from the backend's ``options``; unknown keys are an error."""
    if options is None:
        return "inductor", None
    if not isinstance(options, Mapping):
        raise InvalidArgument(f"backend 'gpuemu': options must be a dict, got {type(options).__name__}")
    unknown = sorted(set(options) - set(OPTION_KEYS))
    if unknown:
        raise InvalidArgument(f"backend 'gpuemu': unknown option {unknown[0]!r}; allowed: {', '.join(OPTION_KEYS)} "
                              "(inner backend options go under 'options')")
    inner = options.get("backend", "inductor")
    if inner == NAME:
        raise InvalidArgument("backend 'gpuemu' cannot wrap itself; pick an inner backend such as 'inductor'")
    if not (isinstance(inner, str) or callable(inner)):
        raise InvalidArgument(f"backend 'gpuemu': options['backend'] must be a backend name or callable, got {inner!r}")
    inner_opts = options.get("options")
    if inner_opts is not None and not isinstance(inner_opts, Mapping):
        raise InvalidArgument("backend 'gpuemu': options['options'] must be a dict of the inner backend's options")
    return inner, (dict(inner_opts) if inner_opts else None)


def compile_inner(inner: Any, gm: Any, example_inputs: Any, *, mode: str | None, options: dict | None) -> Any:
    """Compile with the inner backend exactly as ``torch.compile(backend=inner, mode=, options=)`` would."""
    import torch

    if inner == "inductor":
        wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
        if wrapper is not None:
            return wrapper(mode, options, None)(gm, example_inputs)
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(gm, example_inputs, config_patches=options)
    wrapper = getattr(torch, "_TorchCompileWrapper", None)
    if wrapper is not None:
        return wrapper(inner, mode, options, None)(gm, example_inputs)
    from torch._dynamo.backends.registry import lookup_backend

    kw = {k: v for k, v in (("mode", mode), ("options", options)) if v}
    return lookup_backend(inner)(gm, example_inputs, **kw)


AOT_INNER = ("inductor", "aot_eager")


def compile_aot(inner: str, gm: Any, example_inputs: Any, *, mode: str | None, options: dict | None,
                label: str) -> Any:
    """Compile as ``torch.compile(backend=inner, mode=, options=)`` does, shadowing each AOTAutograd graph."""
    import torch

    from .graph import AotGraphShadow, graph_copy

    def shadowed(kind_of, compile_one):
        def compile_graph(g: Any, inputs: Any, **kw: Any) -> Any:
            kind = kind_of(kw)
            try:
                copy = graph_copy(g)
            except Exception:  # an uncopyable graph is compiled and run, just not shadowed
                copy = None
            out = compile_one(g, inputs, **kw)
            if copy is None:
                return out
            try:
                sh = AotGraphShadow(out, copy, kind=kind, inner=inner, label=label,
                                    cudagraphs=bool(kw.get("cudagraphs")),
                                    donated=_donated(kind, inner))
            except Exception:
                return out
            return out if sh.swappable else sh.boxed()

        return compile_graph

    with torch._functorch.config.patch(enable_autograd_cache=False):
        if inner == "inductor":
            from torch._inductor.compile_fx import compile_fx, compile_fx_inner

            wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
            config = dict(wrapper(mode, options, None).config) if wrapper is not None else dict(options or {})
            inner_compile = shadowed(lambda kw: "graph.backward" if kw.get("is_backward") else "graph.forward",
                                     compile_fx_inner)
            return compile_fx(gm, example_inputs, inner_compile=inner_compile, config_patches=config or None)
        from torch._dynamo.backends.debugging import aot_eager, boxed_nop

        return aot_eager(gm, example_inputs,
                         fw_compiler=shadowed(lambda kw: "graph.forward", boxed_nop),
                         bw_compiler=shadowed(lambda kw: "graph.backward", boxed_nop))


def _donated(kind: str, inner: str) -> frozenset:
    """The backward graph's inputs AOTAutograd donates to Inductor (saved activations whose buffers Inductor may
    reuse for its own values, so that they are changed by the call), read while the backward is compiled."""
    if kind != "graph.backward" or inner != "inductor":
        return frozenset()
    try:
        from torch._inductor.utils import get_donated_idxs

        return frozenset(get_donated_idxs() or ())
    except Exception:  # (a torch without donated buffers)
        return frozenset()


def _label(gm: Any) -> str:
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
    except Exception:
        cid = None
    return f"graph {cid}" if cid is not None else f"graph {type(gm).__name__}@{id(gm):x}"


def gpuemu_backend(gm: Any, example_inputs: Any, *, options: Mapping[str, Any] | None = None,
                   mode: str | None = None, **kwargs: Any) -> Callable[..., Any]:
    """The torch.compile backend (entry point ``gpuemu = gpuemu.backends:gpuemu_backend``)."""
    import copy

    if kwargs:
        raise InvalidArgument(f"backend 'gpuemu': unexpected argument {sorted(kwargs)[0]!r}; "
                              "use options={'backend': ..., 'options': {...}}")
    inner, inner_opts = parse_options(options)
    import gpuemu.hook  # noqa: F401  - installs the hook (from env + gpuemu.yaml) on first use

    label = _label(gm)
    if inner in AOT_INNER:
        try:
            return compile_aot(inner, gm, example_inputs, mode=mode, options=inner_opts, label=label)
        finally:
            gpuemu.hook.ensure_inductor_wrapped()  # novelty: arm, so the new graphs' first calls are checked
    from .graph import ShadowedGraph

    shadow_gm = None
    if not any(isinstance(x, (list, tuple, dict)) for x in example_inputs):  # compiled autograd boxes inputs
        try:
            shadow_gm = copy.deepcopy(gm)
        except Exception:  # an uncopyable graph is compiled and run, just not shadowed
            shadow_gm = None
    compiled = compile_inner(inner, gm, example_inputs, mode=mode, options=inner_opts)
    gpuemu.hook.ensure_inductor_wrapped()
    if shadow_gm is None:
        return compiled
    name = inner if isinstance(inner, str) else getattr(inner, "__name__", repr(inner))
    return ShadowedGraph(compiled, shadow_gm, inner=name, label=label)


def register() -> bool:
    """Register ``gpuemu`` with Dynamo unless that name is taken (or its entry point will load it).

    Returns True when this call registered it.
    """
    try:
        from importlib.metadata import EntryPoint

        from torch._dynamo.backends import registry
    except Exception:  # no torch._dynamo: nothing to register with
        return False
    if NAME in registry._COMPILER_FNS:
        return False
    if isinstance(registry._BACKENDS.get(NAME), EntryPoint):
        return False  # Dynamo is loading it from our entry point right now, or will on lookup
    registry.register_backend(compiler_fn=gpuemu_backend, name=NAME)
    return True


__all__ = ["gpuemu_backend", "register", "parse_options", "compile_inner", "compile_aot", "NAME"]
