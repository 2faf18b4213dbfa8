"""FX graphs as JSON, for replayable snapshots without pickle.

A Dynamo graph is a list of nodes: placeholders (the inputs; parameters are lifted into them), calls of
torch functions, Python operators and tensor methods, attribute reads of constants, and the output.
:func:`graph_to_json` writes each node's op, target (by qualified name) and arguments (nested lists of
node references, numbers, strings, dtypes, devices, slices); constant tensors go to the snapshot beside
the inputs. :func:`graph_from_json` rebuilds a GraphModule, resolving targets only inside ``torch``,
``operator``, ``math`` and ``builtins`` — a snapshot can name an op, never run arbitrary code.
The graph's readable code is kept in the record too (``code``), for people.
"""

from __future__ import annotations

import builtins
import importlib
import math
import operator
from typing import Any

from ..errors import SnapshotError

SCHEMA = 1
ALLOWED_ROOTS = ("torch", "operator", "_operator", "math", "builtins")
_OPS = ("placeholder", "call_function", "call_method", "get_attr", "output")


class UnsupportedGraph(ValueError):
    """A node gpuemu cannot write as JSON (a submodule call, a Python function from user code, ...)."""


def qualified_name(target: Any) -> str:
    """``torch.nn.functional.linear`` for the function; raises UnsupportedGraph outside the allowed roots."""
    from torch.fx.node import _get_qualified_name

    try:
        qual = _get_qualified_name(target)
    except Exception as e:
        raise UnsupportedGraph(f"cannot name call target {target!r}: {e}") from None
    if "." not in qual:
        qual = f"builtins.{qual}"
    if qual.startswith("_operator."):
        qual = "operator." + qual[len("_operator."):]
    if not _allowed(qual) or "<" in qual:
        raise UnsupportedGraph(f"call target {qual} is not an allowed op")
    try:
        resolved = resolve(qual)
    except SnapshotError as e:
        raise UnsupportedGraph(str(e)) from None
    if resolved is not target and getattr(resolved, "__name__", None) != getattr(target, "__name__", None):
        raise UnsupportedGraph(f"call target {qual} does not resolve back to {target!r}")
    return qual


_BUILTINS = {"abs", "min", "max", "len", "getattr", "float", "int", "bool", "round", "sum", "range", "slice",
             "tuple", "list", "pow", "divmod", "isinstance"}
_DENY = ("load", "save", "hub", "package", "jit", "utils", "compile", "_dynamo", "_inductor", "serialization",
         "multiprocessing", "distributed", "cuda.set", "set_", "_C._set", "manual_seed", "methodcaller",
         "attrgetter", "storage", "from_file", "_import")


def _allowed(qual: str) -> bool:
    parts = qual.split(".")
    if parts[0] not in ALLOWED_ROOTS or any(p.startswith("__") for p in parts):
        return False
    if parts[0] == "builtins":
        return len(parts) == 2 and parts[1] in _BUILTINS
    return not any(d in qual for d in _DENY)


def resolve(qual: str) -> Any:
    """The object named ``qual`` (``torch.nn.functional.linear``), only under the allowed roots.

    Allowed: torch, operator and math functions (not loaders, savers, compilers, global setters or
    dunders) and a few pure builtins — a snapshot can name an op, never a way to run code.
    """
    if not _allowed(qual):
        raise SnapshotError(f"graph snapshot names {qual!r}, which gpuemu does not load from a snapshot "
                            f"(allowed: ops under {', '.join(ALLOWED_ROOTS)})")
    parts = qual.split(".")
    for i in range(len(parts), 0, -1):
        modname = ".".join(parts[:i])
        try:
            obj: Any = importlib.import_module(modname)
        except ImportError:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            break
        return obj
    raise SnapshotError(f"graph snapshot names {qual!r}, which this torch does not have")


def _enc(v: Any, constants: dict) -> Any:
    import torch
    import torch.fx as fx

    if isinstance(v, fx.Node):
        return {"node": v.name}
    if v is None or isinstance(v, (bool, int, float, str)):
        if isinstance(v, float) and not math.isfinite(v):
            return {"float": repr(v)}
        return v
    if isinstance(v, (list, tuple)):
        return {"list" if isinstance(v, list) else "tuple": [_enc(x, constants) for x in v]}
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise UnsupportedGraph("dict argument with non-string keys")
        return {"dict": {k: _enc(x, constants) for k, x in v.items()}}
    if isinstance(v, slice):
        return {"slice": [_enc(v.start, constants), _enc(v.stop, constants), _enc(v.step, constants)]}
    if v is Ellipsis:
        return {"ellipsis": True}
    if isinstance(v, torch.dtype):
        return {"dtype": str(v).replace("torch.", "")}
    if isinstance(v, torch.device):
        return {"device": str(v)}
    if isinstance(v, torch.memory_format):
        return {"memory_format": str(v).replace("torch.", "")}
    if isinstance(v, torch.layout):
        return {"layout": str(v).replace("torch.", "")}
    if isinstance(v, torch.Size):
        return {"size": [int(x) for x in v]}
    if isinstance(v, torch.Tensor):
        name = f"const.{len(constants)}"
        constants[name] = v.detach()
        return {"tensor": name}
    if callable(v):
        return {"callable": qualified_name(v)}
    raise UnsupportedGraph(f"argument of type {type(v).__name__}")


def _dec(v: Any, nodes: dict, constants: dict) -> Any:
    import torch

    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, dict):
        (k, x), = v.items()
        if k == "node":
            return nodes[x]
        if k == "float":
            return float(x)
        if k == "list":
            return [_dec(i, nodes, constants) for i in x]
        if k == "tuple":
            return tuple(_dec(i, nodes, constants) for i in x)
        if k == "dict":
            return {kk: _dec(i, nodes, constants) for kk, i in x.items()}
        if k == "slice":
            return slice(*(_dec(i, nodes, constants) for i in x))
        if k == "ellipsis":
            return Ellipsis
        if k == "dtype":
            return _torch_attr(x, torch.dtype)
        if k == "device":
            return torch.device(x)
        if k == "memory_format":
            return _torch_attr(x, torch.memory_format)
        if k == "layout":
            return _torch_attr(x, torch.layout)
        if k == "size":
            return torch.Size(x)
        if k == "tensor":
            if x not in constants:
                raise SnapshotError(f"graph snapshot refers to constant {x!r}, missing from the snapshot")
            return constants[x]
        if k == "callable":
            return resolve(x)
    raise SnapshotError(f"graph snapshot has an argument gpuemu cannot read: {v!r}")


def _torch_attr(name: str, kind: type) -> Any:
    import torch

    obj = getattr(torch, name, None)
    if not isinstance(obj, kind):
        raise SnapshotError(f"graph snapshot names torch.{name}, not a {kind.__name__}")
    return obj


def graph_to_json(gm: Any) -> tuple[dict, dict]:
    """(JSON-able graph, constant tensors) of a GraphModule; raises UnsupportedGraph when it cannot."""
    constants: dict = {}
    nodes = []
    for n in gm.graph.nodes:
        if n.op not in _OPS:
            raise UnsupportedGraph(f"node {n.name}: op {n.op} (submodule calls are not snapshotted)")
        if n.op == "call_function":
            target: Any = qualified_name(n.target)
        elif n.op == "get_attr":
            obj = gm
            for p in str(n.target).split("."):
                obj = getattr(obj, p)
            target = str(n.target)
            name = f"attr.{target}"
            import torch

            if not isinstance(obj, torch.Tensor):
                raise UnsupportedGraph(f"node {n.name}: get_attr of a {type(obj).__name__}")
            constants[name] = obj.detach()
        else:
            target = str(n.target)
        nodes.append({"name": n.name, "op": n.op, "target": target, "args": _enc(tuple(n.args), constants),
                      "kwargs": _enc(dict(n.kwargs), constants)})
    return {"schema": SCHEMA, "nodes": nodes, "code": gm.code}, constants


def graph_from_json(doc: dict, constants: dict) -> Any:
    """Rebuild the GraphModule written by :func:`graph_to_json` (targets resolved under the allowed roots)."""
    import torch
    import torch.fx as fx

    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise SnapshotError(f"graph snapshot schema {doc.get('schema') if isinstance(doc, dict) else doc!r} "
                            f"is not {SCHEMA}")
    g = fx.Graph()
    root = torch.nn.Module()
    nodes: dict = {}
    for nd in doc["nodes"]:
        op, target = nd["op"], nd["target"]
        if op not in _OPS:
            raise SnapshotError(f"graph snapshot node op {op!r} is not allowed")
        args = _dec(nd["args"], nodes, constants)
        kwargs = _dec(nd["kwargs"], nodes, constants)
        if op == "placeholder":
            node = g.placeholder(target)
        elif op == "call_function":
            if target == "builtins.getattr" and (len(args) < 2 or not isinstance(args[1], str)
                                                 or args[1].startswith("_")):
                raise SnapshotError(f"graph snapshot reads a private attribute through getattr: {args[1:2]!r}")
            node = g.call_function(resolve(target), tuple(args), dict(kwargs))
        elif op == "call_method":
            if not isinstance(target, str) or not target.isidentifier() or target.startswith("_") \
                    or not hasattr(torch.Tensor, target) or target in ("storage", "untyped_storage", "set_"):
                raise SnapshotError(f"graph snapshot calls method {target!r}, not a torch.Tensor method")
            node = g.call_method(target, tuple(args), dict(kwargs))
        elif op == "get_attr":
            attr = f"attr.{target}"
            if attr not in constants:
                raise SnapshotError(f"graph snapshot reads attribute {target!r}, missing from the snapshot")
            _set_attr(root, target, constants[attr])
            node = g.get_attr(target)
        else:
            node = g.output(args[0] if len(args) == 1 else args)
        node.name = nd["name"]
        nodes[nd["name"]] = node
    return fx.GraphModule(root, g)


def _set_attr(root: Any, dotted: str, value: Any) -> None:
    import torch

    parts = dotted.split(".")
    mod = root
    for p in parts[:-1]:
        if not hasattr(mod, p):
            setattr(mod, p, torch.nn.Module())
        mod = getattr(mod, p)
    mod.register_buffer(parts[-1], value)


_ = builtins  # resolve() imports builtins by name
