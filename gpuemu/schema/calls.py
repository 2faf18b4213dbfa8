"""How a reference-defined kernel and its reference are called, and where their example calls come from.

Two conventions:

- **function**: ``kernel(*args)`` and ``reference(*args)`` take the same arguments; an example call is what
  ``get_inputs()`` returns (a list: positional arguments; a dict: keyword arguments, the KernelBench convention).
  Several example calls: ``get_inputs`` returns a list whose every element is itself a list or a dict, or the
  function is named ``get_examples``/``examples`` and returns a list of calls.
- **module** (a KernelBench problem): the reference is an ``nn.Module`` class (``Model``), the kernel another
  (``ModelNew``) built with the same constructor arguments (``get_init_inputs()``); both get the same parameters.
  The call's arguments are then the forward inputs, the constructor's arguments, then every floating parameter
  and buffer of ``Model`` by name (:class:`ModuleCall` splits them again). ``ModelNew``'s parameters are set from
  ``Model``'s by name; one with no namesake takes the ``Model`` parameter of the same shape, in declaration
  order; anything left unmatched is a usage error naming both lists.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..errors import InvalidArgument


@dataclass(frozen=True)
class Call:
    """One example call: positional arguments and keyword arguments."""

    args: tuple
    kwargs: Mapping[str, Any]


def as_calls(value: Any, where: str) -> list[Call]:
    """What an inputs function returned, as example calls (see the module docstring)."""
    if isinstance(value, Mapping):
        return [Call((), dict(value))]
    if isinstance(value, (list, tuple)):
        items = list(value)
        if items and all(isinstance(x, (list, tuple, Mapping)) for x in items) and \
                all(_holds_call(x) for x in items) and where.rsplit(":", 1)[-1] in ("get_examples", "examples"):
            return [c for x in items for c in as_calls(x, where.rsplit(":", 1)[0] + ":get_inputs")]
        if items and all(isinstance(x, (list, Mapping)) for x in items) and all(_holds_call(x) for x in items):
            return [c for x in items for c in as_calls(x, where)]
        return [Call(tuple(items), {})]
    raise InvalidArgument(f"{where} returned a {type(value).__name__}; return the arguments of one call (a list, or "
                          "a dict of keyword arguments) or a list of such calls")


def _holds_call(x: Any) -> bool:
    """A list/dict that is itself a call's arguments (holds a tensor), not a tensor-less value."""
    import torch

    vals = x.values() if isinstance(x, Mapping) else x
    return any(isinstance(v, torch.Tensor) for v in vals)


def is_module_class(obj: Any) -> bool:
    try:
        import torch

        return isinstance(obj, type) and issubclass(obj, torch.nn.Module)
    except Exception:  # pragma: no cover
        return False


def slot_names(fn: Callable, call: Call, prefix: str = "arg") -> list[str]:
    """A name per argument of ``call``: the parameter names of ``fn`` where its signature gives them."""
    names: list[str] = []
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    for i in range(len(call.args)):
        names.append(params[i].name if i < len(params) else f"{prefix}{i}")
    names += list(call.kwargs)
    return _unique(names)


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0)
        seen[n] = k + 1
        out.append(n if k == 0 else f"{n}_{k}")
    return out


def call_function(fn: Callable, args: Sequence[Any], keywords: Sequence[str], writes: Sequence[int] = ()) -> Any:
    """``fn(*positional, **keyword)`` where the last ``len(keywords)`` of ``args`` go by those names.

    ``writes``: the positions of the arguments ``fn`` writes in place (an in-place kernel and its in-place
    reference). Those are copied first (same sizes and strides), so the caller's tensors stay as they were, and the
    result is what ``fn`` returned, less any view of those copies, followed by the copies in argument order: the
    in-place call as a function, judged as any other."""
    if not writes:
        n = len(args) - len(keywords)
        return fn(*args[:n], **dict(zip(keywords, args[n:])))
    args = list(args)
    copies = []
    for i in writes:
        args[i] = writable_copy(args[i])
        copies.append(args[i])
    return tuple(outputs_beside(call_function(fn, args, keywords), copies))


def call_noting_writes(fn: Callable, args: Sequence[Any], keywords: Sequence[str]) -> tuple[Any, list, tuple[int, ...]]:
    """(what ``fn`` returned, its outputs, the positions of the arguments it wrote in place): ``fn`` called on
    copies of ``args`` (the caller's stay as they were); its outputs are what it returned, less any view of a
    written copy, then the written copies, as :func:`call_function` with those ``writes`` gives them. A write is
    seen by the tensor's version counter, whatever the values written."""
    import torch

    copies = [writable_copy(v) for v in args]
    versions = [v._version if isinstance(v, torch.Tensor) else None for v in copies]
    out = call_function(fn, copies, keywords)
    writes = tuple(i for i, (v, n) in enumerate(zip(copies, versions)) if n is not None and v._version != n)
    return out, outputs_beside(out, [copies[i] for i in writes]), writes


def outputs_beside(out: Any, written: Sequence[Any]) -> list:
    """The outputs of a call that returned ``out`` and wrote the tensors ``written`` in place: ``out``'s tensors
    less any view of a written one, then the written ones."""
    stores = {w.untyped_storage().data_ptr() for w in written}
    return [t for t in flatten_outputs(out) if t.untyped_storage().data_ptr() not in stores] + list(written)


def flatten_outputs(out: Any) -> list:
    """The tensors of a reference's (or kernel's) result: a tensor, or a tuple/list/dict of them, in order."""
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flatten_outputs(o)]
    if isinstance(out, Mapping):
        return [t for o in out.values() for t in flatten_outputs(o)]
    return []


def writable_copy(t: Any) -> Any:
    """A copy of tensor ``t`` with its sizes and strides (a padded or transposed layout stays one), contiguous where
    its strides overlap (an expanded tensor: no in-place write could have a meaning there)."""
    import torch

    if not isinstance(t, torch.Tensor):
        return t
    try:
        return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device).copy_(t)
    except RuntimeError:  # overlapping strides
        return t.clone(memory_format=torch.contiguous_format)


# ------------------------------------------------------------------------------------ KernelBench modules
def state_entries(model: Any) -> list[tuple[str, Any]]:
    """(name, tensor) of a module's floating parameters and buffers, in declaration order."""
    out = []
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if t is not None and t.is_floating_point():
            out.append((name, t))
    return out


def match_params(model_new: Any, reference_names: list[tuple[str, tuple[int, ...]]]) -> list[str | None]:
    """For each of ``model_new``'s floating parameters/buffers, the reference parameter it takes: by name, else the
    first unused one of the same shape. InvalidArgument where one of ModelNew's is left without a source."""
    new = [(n, tuple(t.shape)) for n, t in state_entries(model_new)]
    by_name = {n: s for n, s in reference_names}
    used: set[str] = set()
    out: list[str | None] = []
    for name, shape in new:
        if name in by_name and by_name[name] == shape:
            out.append(name)
            used.add(name)
        else:
            out.append(None)
    for i, (name, shape) in enumerate(new):
        if out[i] is None:
            cand = next((n for n, s in reference_names if s == shape and n not in used), None)
            if cand is None:
                raise InvalidArgument(
                    f"ModelNew's parameter {name!r} {list(shape)} has no counterpart in Model (by name, or by shape "
                    f"among the unused ones). Model has: {', '.join(f'{n}{list(s)}' for n, s in reference_names)}; "
                    f"ModelNew has: {', '.join(f'{n}{list(s)}' for n, s in new)}. Give them the same names.")
            out[i] = cand
            used.add(cand)
    return out


class ModuleCall:
    """A module class as a function of the schema's arguments: ``(*inputs, *init, *params) -> forward(*inputs)``.

    The module is built with the constructor's arguments, then its floating parameters and buffers point at the
    given tensors (their dtype kept: an fp64 reference run gets float64 ones). ``mapping`` (ModelNew): its own
    parameter name -> the reference parameter whose value it takes (:func:`match_params`)."""

    def __init__(self, cls: type, layout: Mapping[str, Any], *, mapping: Mapping[str, str] | None = None) -> None:
        self.cls = cls
        self.n_inputs = len(layout["inputs"])
        self.input_keywords = list(layout.get("input_keywords", []))
        self.n_init = len(layout["init"])
        self.params = list(layout["params"])
        self.mapping = dict(mapping) if mapping is not None else None
        self.__name__ = getattr(cls, "__name__", "module")
        self.__qualname__ = self.__name__
        self.__module__ = getattr(cls, "__module__", "")

    def build(self, init: Sequence[Any], values: Mapping[str, Any]) -> Any:
        import torch

        with _fork_rng():
            model = self.cls(*init)
        model.eval()
        pairs = self.mapping.items() if self.mapping is not None else ((n, n) for n, _ in state_entries(model))
        with torch.no_grad():
            for name, src in pairs:
                if values.get(src) is not None:
                    _set_tensor(model, name, values[src])
        return model

    def __call__(self, *args: Any) -> Any:
        inputs = args[:self.n_inputs]
        init = args[self.n_inputs:self.n_inputs + self.n_init]
        model = self.build(init, dict(zip(self.params, args[self.n_inputs + self.n_init:])))
        n = self.n_inputs - len(self.input_keywords)
        return model(*inputs[:n], **dict(zip(self.input_keywords, inputs[n:])))


def _set_tensor(model: Any, name: str, value: Any) -> None:
    """Point parameter/buffer ``name`` of ``model`` at ``value`` (its dtype and device kept as given)."""
    import torch

    owner, _, leaf = name.rpartition(".")
    mod = model.get_submodule(owner) if owner else model
    current = getattr(mod, leaf)
    if isinstance(current, torch.nn.Parameter):
        current.data = value
    else:
        setattr(mod, leaf, value)


class _fork_rng:
    """Construct modules without moving the caller's torch RNG (their initial weights are overwritten anyway)."""

    def __enter__(self):
        import torch

        self._state = torch.random.get_rng_state()
        return self

    def __exit__(self, *exc):
        import torch

        torch.random.set_rng_state(self._state)
        return False
