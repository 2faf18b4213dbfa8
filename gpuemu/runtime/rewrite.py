"""Turning a @triton.jit function into the Python function the runtime calls once per program.

Like Triton's interpreter, assignments of Python scalars become tensors (compiled Triton does the same).
Beyond it, the rewrite makes Python's boolean operators behave as compiled Triton's do on tensors:
``a and b`` / ``a or b`` / ``not a`` become logical and / or / not when an operand is a tensor (the
interpreter evaluates them as Python truthiness, so a mask ``offs < n and offs >= lo`` silently collapses
to its second half), and a Python ``assert`` on a tensor becomes a device assertion. The source comes from
the JITFunction's in-memory copy (no re-read of the file), line numbers map to the file, and closures over
local variables keep their values. A function with no source to read (built with ``exec()``) runs as
written, as Triton's interpreter runs it.
"""

from __future__ import annotations

import ast
import threading
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable

from ._compat import Source, source_of

RT_NAME = "__gpuemu_rt__"  # injected into the kernel module's globals: the helpers below


@dataclass(frozen=True)
class Rewritten:
    fn: Callable
    codes: frozenset  # every code object of the rewritten function (for source-line attribution)
    source: Source


class _Transformer(ast.NodeTransformer):
    def _rt(self, attr: str) -> ast.expr:
        return ast.Attribute(value=ast.Name(id=RT_NAME, ctx=ast.Load()), attr=attr, ctx=ast.Load())

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        self.generic_visit(node)
        node.value = ast.Call(func=self._rt("assign"), args=[node.value], keywords=[])
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        lambdas = [ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                              body=v) for v in node.values]
        return ast.copy_location(ast.Call(func=self._rt(fn), args=lambdas, keywords=[]), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(ast.Call(func=self._rt("not_"), args=[node.operand], keywords=[]), node)
        return node

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        self.generic_visit(node)
        msg = node.msg if node.msg is not None else ast.Constant(value=ast.unparse(node.test))
        call = ast.Call(func=self._rt("assert_"), args=[node.test, msg], keywords=[])
        return ast.copy_location(ast.Expr(value=call), node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.decorator_list = []
        self.generic_visit(node)
        return node


class _Helpers:
    """What the rewritten code calls (``__gpuemu_rt__.and_`` etc.)."""

    @staticmethod
    def _is_tensor(x: Any) -> bool:
        import triton.language as tl

        return isinstance(x, tl.tensor)

    def assign(self, value: Any) -> Any:
        from ._compat import semantic

        return semantic().to_tensor(value, False)

    def and_(self, *thunks: Callable[[], Any]) -> Any:
        acc = thunks[0]()
        for th in thunks[1:]:
            if not self._is_tensor(acc):
                if not acc:  # Python short-circuit for Python / constexpr values, as compiled Triton does
                    return acc
                acc = th()
                continue
            acc = acc.logical_and(th())
        return acc

    def or_(self, *thunks: Callable[[], Any]) -> Any:
        acc = thunks[0]()
        for th in thunks[1:]:
            if not self._is_tensor(acc):
                if acc:
                    return acc
                acc = th()
                continue
            acc = acc.logical_or(th())
        return acc

    def not_(self, x: Any) -> Any:
        if self._is_tensor(x):
            return x.__not__()
        return not x

    def assert_(self, test: Any, msg: Any) -> None:
        if self._is_tensor(test):
            import triton.language as tl

            tl.device_assert(test, str(msg))
            return
        assert test, msg


HELPERS = _Helpers()
_cache: "weakref.WeakKeyDictionary[Callable, tuple[str, Rewritten]]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def rewrite(kernel: Any, fn: Callable) -> Rewritten:
    """The runtime's version of ``fn`` (cached per function and source text)."""
    live = getattr(kernel, "src", None)  # a JITFunction's in-memory source (may be edited): the cache key
    with _lock:
        hit = _cache.get(fn)
    if hit is not None and (not isinstance(live, str) or hit[0] == live):
        return hit[1]
    try:
        src = source_of(kernel, fn)
    except (OSError, TypeError):  # no source (a kernel built with exec()): run it as written, as Triton's
        code = fn.__code__        # interpreter does (without the rewrites above)
        result = Rewritten(fn, frozenset(_codes(code)), Source("", code.co_filename, code.co_firstlineno))
        with _lock:
            _cache[fn] = (live if isinstance(live, str) else "", result)
        return result
    tree = ast.parse(src.text)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise TypeError(f"{getattr(fn, '__name__', fn)!r}: expected a function definition in its source")
    tree = _Transformer().visit(tree)
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, src.def_line - 1)
    freevars = fn.__code__.co_freevars
    if freevars:  # keep closures: define the kernel inside a function that takes the captured values
        outer = ast.FunctionDef(
            name="__gpuemu_outer__",
            args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in freevars], kwonlyargs=[],
                               kw_defaults=[], defaults=[]),
            body=[fdef, ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load()))], decorator_list=[], returns=None)
        ast.copy_location(outer, fdef)
        tree = ast.Module(body=[outer], type_ignores=[])
        ast.fix_missing_locations(tree)
    code = compile(tree, filename=src.filename, mode="exec")
    g = fn.__globals__
    g.setdefault(RT_NAME, HELPERS)
    ns: dict[str, Any] = {}
    exec(code, g, ns)
    if freevars:
        cells = [c.cell_contents for c in fn.__closure__]
        new_fn = ns["__gpuemu_outer__"](*cells)
    else:
        new_fn = ns[fdef.name]
    if fn.__defaults__ and new_fn.__defaults__ is None:
        new_fn.__defaults__ = fn.__defaults__
    result = Rewritten(new_fn, frozenset(_codes(new_fn.__code__)), src)
    with _lock:
        _cache[fn] = (src.text, result)
    return result


def _codes(code: types.CodeType):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)
