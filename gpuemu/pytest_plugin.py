"""pytest plugin (entry point ``pytest11``): one line per launcher fuzzes it against the op's fp64 oracle.

Two spellings::

    # a marker on the launcher itself, in a test module: collected as the test item ``softmax``
    softmax = pytest.mark.gpuemu(op="softmax")(kernels.softmax)

    # or the fixture, inside any test
    def test_softmax(gpuemu_fuzz):
        gpuemu_fuzz(kernels.softmax, op="softmax", iterations=50)

A failure shows the FAIL line, the mismatch report and the replay command (also in the JUnit XML pytest
writes, with the seed and replay as testcase properties). A mistake in a marker's or the fixture's arguments
(an unknown op, a dtype gpuemu does not fuzz, a ``requires`` naming no argument) is a usage error of one line:
for a marked launcher at collection ("ERROR collecting ..."), for the fixture as the test's failure, never a
traceback into gpuemu. Every argument is checked against :data:`MARK_KEYS`, one table. A PRECONDITION under
``preconditions="warn"`` passes with a :class:`GpuemuPreconditionWarning`. Options: ``--gpuemu-iterations``,
``--gpuemu-seed`` (default: a seed derived from the test id, so a test is reproducible; ``random`` for a
fresh one), ``--gpuemu-store``, ``--gpuemu-device``. Works under pytest-xdist (items are independent).

``--gpuemu-ray [ADDRESS]`` runs the marked launchers as Ray tasks (``gpuemu[ray]``): all of them are submitted
when the first one runs, each item then waits for its own task, so the cluster works on them at once while pytest
reports them in its order. Seeds are the same as in a local run (derived on the driver); a task fuzzes, shrinks
and explains into a temporary store and ships its files back into ``--gpuemu-store``, where the replay lines point
(``gpuemu reproduce`` needs no Ray). No address starts a local cluster; ``auto`` joins the ambient one. The
``gpuemu_fuzz`` fixture runs in the pytest process (its launcher is known only when the test runs).

Nothing heavy is imported here: gpuemu's fuzzer (torch, Triton) loads when the first gpuemu test runs.
"""

from __future__ import annotations

import os
import zlib
from typing import Any, Callable

import pytest


class GpuemuUsageError(Exception):
    """A marker's or the fixture's argument gpuemu cannot use; shown as one line, never a traceback."""


def _positive_int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise GpuemuUsageError(f"expected a positive integer, got {v!r}")
    return v


def _op(v: Any) -> str:
    from gpuemu import ops

    try:
        return ops.get(v).name
    except Exception as e:  # UnknownOp: names the op and the closest one
        raise GpuemuUsageError(str(e)) from None


def _dtypes(v: Any) -> list:
    from gpuemu.cases import canonical_dtype

    names = [v] if isinstance(v, str) else v
    if not isinstance(names, (list, tuple)) or not names:
        raise GpuemuUsageError(f"expected a list of dtypes (fp32, fp16, bf16), got {v!r}")
    out = []
    for d in names:
        try:
            out.append(canonical_dtype(d))
        except Exception:
            raise GpuemuUsageError(f"{d!r} is not a dtype gpuemu fuzzes; use fp32, fp16 or bf16") from None
    return out


def _seed(v: Any) -> Any:
    try:
        n = int(v, 0) if isinstance(v, str) else v
    except ValueError:
        n = None
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < 1 << 64:
        raise GpuemuUsageError(f"expected an integer in [0, 2**64) or a decimal/0x-hex string, got {v!r}")
    return v


def _strategy(v: Any) -> str:
    from gpuemu.cases import STRATEGIES

    if v not in STRATEGIES:
        raise GpuemuUsageError(f"{v!r} is not a strategy; use one of {', '.join(STRATEGIES)}")
    return v


def _rulepack(v: Any) -> tuple:
    packs = (v,) if isinstance(v, str) else tuple(v or ())
    for p in packs:
        if not os.path.isfile(p):
            raise GpuemuUsageError(f"rule pack {p!r} does not exist")
    return packs


def _requires(v: Any) -> Any:
    from gpuemu.preconditions import Requires

    if isinstance(v, Requires):
        return v
    try:
        return Requires.from_dict(v)
    except ValueError as e:
        raise GpuemuUsageError(str(e)) from None


def _allow_fail(v: Any) -> str:
    if v not in ("allow", "fail"):
        raise GpuemuUsageError(f"{v!r}: use allow or fail")
    return v


def _supports(v: Any) -> Any:
    from gpuemu.envelope import parse_supports

    try:
        parse_supports(v)
    except ValueError as e:
        raise GpuemuUsageError(str(e)) from None
    return v


def _policy(v: Any) -> str:
    from gpuemu.preconditions import POLICIES

    if v not in POLICIES:
        raise GpuemuUsageError(f"{v!r}: use one of {', '.join(POLICIES)}")
    return v


def _framework(v: Any) -> str:
    from gpuemu.frameworks import canonical

    try:
        return canonical(v)
    except Exception as e:
        raise GpuemuUsageError(str(e)) from None


# Every argument @pytest.mark.gpuemu(...) and gpuemu_fuzz(...) take: name -> check (returns the value gpuemu.fuzz
# gets). To add one: a row here, and its use in _fuzz_kwargs.
def _reference(v: Any) -> Any:
    """A reference or an inputs function: a callable, a class (KernelBench's Model) or a ``file.py:name`` target."""
    if callable(v) or (isinstance(v, str) and ":" in v):
        return v
    raise GpuemuUsageError("give a callable or 'path/to/file.py:name'")


def _declaration(v: Any) -> Any:
    from gpuemu.errors import InvalidArgument
    from gpuemu.schema.declare import load_declaration

    try:
        load_declaration(v)
    except InvalidArgument as e:
        raise GpuemuUsageError(str(e)) from None
    return v


MARK_KEYS: dict[str, Callable[[Any], Any]] = {
    "op": _op, "iterations": _positive_int, "seed": _seed, "dtypes": _dtypes, "strategy": _strategy,
    "rulepack": _rulepack, "max_failures": _positive_int, "requires": _requires, "preconditions": _policy,
    "framework": _framework, "reference": _reference, "inputs": _reference, "schema": _declaration,
    "limits": _allow_fail, "supports": _supports, "refusals": _allow_fail,
}


def _validated(kw: dict, where: str) -> dict:
    """``kw`` with every value checked; one GpuemuUsageError line naming ``where`` and the argument otherwise."""
    from difflib import get_close_matches

    unknown = sorted(set(kw) - set(MARK_KEYS))
    if unknown:
        close = get_close_matches(unknown[0], list(MARK_KEYS), n=1)
        raise GpuemuUsageError(f"{where} got unknown keyword {unknown[0]!r}; "
                               + (f"did you mean {close[0]!r}? " if close else "")
                               + f"allowed: {', '.join(sorted(MARK_KEYS))}")
    out = {}
    for k, v in kw.items():
        if v is None:
            out[k] = v
            continue
        try:
            out[k] = MARK_KEYS[k](v)
        except GpuemuUsageError as e:
            raise GpuemuUsageError(f"{where}: {k}={v!r}: {e}") from None
    if out.get("requires") is not None and out.get("op"):
        from gpuemu import ops

        try:
            out["requires"].check_against(ops.get(out["op"]))
        except Exception as e:
            raise GpuemuUsageError(f"{where}: requires: {e}") from None
    return out


def pytest_addoption(parser) -> None:
    group = parser.getgroup("gpuemu", "gpuemu: fuzz kernel launchers against the fp64 oracle")
    group.addoption("--gpuemu-iterations", type=int, default=None, metavar="N",
                    help="cases per launcher (default: the marker's, else the rule pack's)")
    group.addoption("--gpuemu-seed", default=None, metavar="SEED",
                    help="run seed, decimal or 0x-hex, or 'random' (default: derived from the test id)")
    group.addoption("--gpuemu-store", default=None, metavar="DIR",
                    help="failure store for replay (default: .gpuemu, or GPUEMU_STORE)")
    group.addoption("--gpuemu-device", default="auto", choices=("auto", "cpu", "cuda"),
                    help="auto: CUDA when a GPU is present, else Triton's interpreter on the CPU")
    group.addoption("--gpuemu-ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                    help="run marked launchers as Ray tasks: no ADDRESS = a local cluster, 'auto' = the ambient "
                         "one, or host:port (needs gpuemu[ray])")


def _no_nvidia_driver() -> bool:
    # cheap, torch-free: without a driver Triton cannot launch natively, so the interpreter is the only way
    return not (os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia"))


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "gpuemu(op, *, iterations=None, seed=None, dtypes=None, strategy=None, rulepack=None): fuzz "
                   "the marked launcher against op's fp64 oracle (on a test function: defaults for gpuemu_fuzz)")
    if config.getoption("gpuemu_ray", None) is not None:
        try:
            import ray  # noqa: F401  (only when asked for: importing Ray costs a second or two)
        except ImportError:
            raise pytest.UsageError("--gpuemu-ray needs Ray: pip install 'gpuemu[ray]' (or pip install ray)") from None
    device = config.getoption("gpuemu_device", "auto")
    # Triton reads TRITON_INTERPRET when a kernel is decorated, i.e. when test modules import kernels:
    # set it now, before collection, and only where native launches cannot work anyway
    if device == "cpu" or (device == "auto" and _no_nvidia_driver()):
        os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_report_header(config) -> str | None:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return "gpuemu: Triton kernels run under the interpreter (CPU)"
    return None


def _mark_kwargs(mark, where: str) -> dict:
    """A marker's arguments, checked (GpuemuUsageError otherwise)."""
    if mark.args:
        if len(mark.args) == 1 and "op" not in mark.kwargs:
            kw = dict(mark.kwargs, op=mark.args[0])
        else:
            raise GpuemuUsageError(f"{where}: @pytest.mark.gpuemu takes op as its only positional argument")
    else:
        kw = dict(mark.kwargs)
    return _validated(kw, f"{where}: @pytest.mark.gpuemu")


def _run_seed(config, nodeid: str, given: Any) -> int | None:
    if given is not None:
        return int(given, 0) if isinstance(given, str) else int(given)
    opt = config.getoption("gpuemu_seed")
    if opt == "random":
        return None
    if opt is not None:
        try:
            return int(opt, 0)
        except ValueError:
            raise pytest.UsageError(f"--gpuemu-seed {opt!r}: use an integer (decimal or 0x-hex) or 'random'") from None
    return zlib.crc32(nodeid.encode())


class GpuemuFailure(AssertionError):
    """The launcher failed the oracle; the message is the failure report."""


def _fuzz_kwargs(config, nodeid: str, kw: dict) -> dict:
    """The keyword arguments of ``gpuemu.fuzz`` for one item: its marker's, then the command line's."""
    op = kw.get("op")
    if bool(op) == (kw.get("reference") is not None):
        raise GpuemuUsageError(f"{nodeid}: gpuemu needs op=... (e.g. @pytest.mark.gpuemu(op='softmax')) or reference=... "
                               "(the launcher's PyTorch reference, with inputs= its example call), one of the two")
    for k in ("inputs", "schema"):
        if kw.get(k) is not None and kw.get("reference") is None:
            raise GpuemuUsageError(f"{nodeid}: gpuemu's {k}= goes with reference=")
    device = config.getoption("gpuemu_device")
    return dict(op=op or None, reference=kw.get("reference"), inputs=kw.get("inputs"), schema=kw.get("schema"),
                iterations=config.getoption("gpuemu_iterations") or kw.get("iterations"),
                seed=_run_seed(config, nodeid, kw.get("seed")), dtypes=kw.get("dtypes"), strategy=kw.get("strategy"),
                store=config.getoption("gpuemu_store"), rulepack=kw.get("rulepack") or (),
                device=None if device == "auto" else device, max_failures=kw.get("max_failures"),
                requires=kw.get("requires"), preconditions=kw.get("preconditions"), framework=kw.get("framework"),
                limits=kw.get("limits"), supports=kw.get("supports"), refusals=kw.get("refusals"))


def _outcome(result: Any, store: str | None) -> dict:
    """What pytest shows of a fuzz result: ``status`` (passed, failed, skipped), the ``message`` and the JUnit
    properties. Plain data, so a Ray task can send it back."""
    from gpuemu.preconditions import counts_as

    op = result.op
    props = [("gpuemu_seed", f"0x{result.seed:x}"), ("gpuemu_summary", result.summary())]
    policy = getattr(result, "precondition_policy", "fail")
    bad = [f for f in result.failures if counts_as(f.verdict.status, policy) == "fail"]
    warned = [f for f in result.failures if counts_as(f.verdict.status, policy) == "warn"]
    if not bad and warned:  # passes, with the report as a warning (the same PRECONDITION policy as everywhere)
        props.append(("gpuemu_warning", warned[0].line()))
        return {"status": "passed", "properties": props,
                "warning": f"gpuemu: {result.target}: {len(warned)} PRECONDITION case(s), passed under "
                           f"preconditions='warn': {warned[0].line()}"}
    if not bad and not result.ok:  # no failing case, yet the run fails: every case refused, or refusals: fail
        return {"status": "failed", "properties": props,
                "message": f"gpuemu: {result.target}: {result.summary()}"}
    if bad:
        # the fuzzer's replay line names the store and target where needed (older ones: add the store)
        replay = bad[0].replay_line() if hasattr(bad[0], "replay_line") else \
            bad[0].replay + (f" --store {store}" if store else "")
        props.append(("gpuemu_replay", replay))
        lines = [f"gpuemu: {result.target} is not a correct {op}", bad[0].line(), f"replay: {replay}",
                 f"case: {bad[0].case.describe()}"]
        if bad[0].original is not None:
            lines.append(f"shrunk from: {bad[0].original.describe()}")
        if bad[0].verdict.detail:
            lines.append(bad[0].verdict.detail)
        lines += [f.line() for f in bad[1:6]]
        lines.append(result.summary())
        return {"status": "failed", "message": "\n".join(lines), "properties": props}
    if result.iterations == 0:
        return {"status": "skipped", "properties": props,
                "message": f"gpuemu: no case of {op} ran: " + "; ".join(f"{k}: {v}" for k, v in result.skipped.items())}
    return {"status": "passed", "message": "", "properties": props}


class GpuemuPreconditionWarning(UserWarning):
    """A launcher passed under ``preconditions="warn"`` although it is silently wrong outside an undeclared
    precondition (the warning carries the PRECONDITION line)."""


def _report(outcome: dict, user_properties: list, launcher: Callable | None = None) -> None:
    user_properties.extend(tuple(p) for p in outcome["properties"])
    if outcome.get("warning"):
        import warnings

        code = getattr(getattr(launcher, "__wrapped__", None) or launcher, "__code__", None)
        if code is not None:  # the warnings summary names the launcher's line, not the plugin's
            warnings.warn_explicit(GpuemuPreconditionWarning(outcome["warning"]), GpuemuPreconditionWarning,
                                   code.co_filename, code.co_firstlineno)
        else:
            warnings.warn(GpuemuPreconditionWarning(outcome["warning"]), stacklevel=2)
    if outcome["status"] == "failed":
        raise GpuemuFailure(outcome["message"])
    if outcome["status"] == "skipped":
        pytest.skip(outcome["message"])


def _run(config, nodeid: str, fn: Callable, kw: dict, user_properties: list) -> Any:
    import gpuemu
    from gpuemu.errors import GpuemuError

    fkw = _fuzz_kwargs(config, nodeid, kw)
    try:
        result = gpuemu.fuzz(fn, **fkw)
    except GpuemuError as e:  # a launcher that cannot take the op's arguments, no dtype left, a bad rule pack
        raise GpuemuUsageError(f"{nodeid}: {e}") from None
    _report(_outcome(result, fkw["store"]), user_properties, fn)
    return result


class GpuemuItem(pytest.Item):
    """A launcher marked with @pytest.mark.gpuemu, run as one test."""

    def __init__(self, *, launcher: Callable, kwargs: dict, **kw) -> None:
        super().__init__(**kw)
        self.launcher, self.kwargs = launcher, kwargs

    def runtest(self) -> None:
        if self.config.getoption("gpuemu_ray") is not None:
            _report(_on_ray(self), self.user_properties)
            return
        _run(self.config, self.nodeid, self.launcher, self.kwargs, self.user_properties)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, (GpuemuFailure, GpuemuUsageError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        import inspect

        try:
            line = inspect.getsourcelines(self.launcher)[1] - 1
        except (OSError, TypeError):
            line = None
        judged_by = self.kwargs.get("op") or ("reference" if self.kwargs.get("reference") else None)
        return self.path, line, f"gpuemu {judged_by}: {self.name}"


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name: str, obj: Any):
    """Collect launchers marked @pytest.mark.gpuemu in a test module (test functions are left to pytest)."""
    if not callable(obj) or isinstance(obj, type) or collector.funcnamefilter(name):
        return None
    marks = [m for m in getattr(obj, "pytestmark", []) if getattr(m, "name", None) == "gpuemu"]
    if not marks:
        return None
    try:
        kw = _mark_kwargs(marks[-1], f"{collector.nodeid}::{name}")
    except GpuemuUsageError as e:  # "ERROR collecting", the one line, no traceback (pytest's CollectError)
        raise collector.CollectError(f"gpuemu usage error: {e}") from None
    return GpuemuItem.from_parent(collector, name=name, launcher=obj, kwargs=kw)


def pytest_collection_modifyitems(session, config, items) -> None:
    """A test function's own @pytest.mark.gpuemu (defaults for gpuemu_fuzz) is checked at collection too: a
    mistake is pytest's usage error (exit 4, one line), before any test runs."""
    bad = []
    for item in items:
        if isinstance(item, GpuemuItem):
            continue
        for mark in item.iter_markers("gpuemu"):
            try:
                _mark_kwargs(mark, item.nodeid)
            except GpuemuUsageError as e:
                bad.append(str(e))
    if bad:
        raise pytest.UsageError("gpuemu: " + bad[0] + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))


@pytest.fixture
def gpuemu_fuzz(request) -> Callable[..., Any]:
    """``gpuemu_fuzz(launcher, op=..., **options)`` fuzzes and fails the test with the gpuemu report.

    Options default to a ``@pytest.mark.gpuemu(...)`` on the test, then the command-line options.
    Returns the FuzzResult when every case passed.
    """
    marks = [m for m in request.node.iter_markers("gpuemu")]
    base = _mark_kwargs(marks[0], request.node.nodeid) if marks else {}  # checked at collection already
    props = request.node.user_properties

    def run(launcher: Callable, op: str | None = None, **options: Any):
        message = None
        try:
            kw = dict(base, **_validated(dict(options, **({"op": op} if op is not None else {})), "gpuemu_fuzz"))
            return _run(request.config, request.node.nodeid, launcher, kw, props)
        except GpuemuUsageError as e:
            message = f"gpuemu usage error: {e}"
        except GpuemuFailure as e:
            message = str(e)
        # outside the except block: the report is shown once (pytest.fail inside it chains the two exceptions,
        # and pytest printed both, "During handling of the above exception...")
        pytest.fail(message, pytrace=False)

    return run


# ---------------------------------------------------------------- --gpuemu-ray


def _on_ray(item: GpuemuItem) -> dict:
    """This item's outcome from its Ray task; the first item to ask submits every marked item of the session."""
    from .check.on_ray import RaySession

    config = item.config
    state = config.stash.setdefault(_RAY_KEY, {})
    if not state:
        items = [it for it in item.session.items if isinstance(it, GpuemuItem)]
        state["session"] = RaySession(config.getoption("gpuemu_ray"), device=config.getoption("gpuemu_device"),
                                      root=str(config.rootpath))
        config.add_cleanup(state["session"].close)
        for it in items:
            state[it.nodeid] = state["session"].submit(_item_target(it), _fuzz_kwargs(config, it.nodeid, it.kwargs))
    return state["session"].outcome(state[item.nodeid])


_RAY_KEY = pytest.StashKey[dict]()


def _item_target(item: GpuemuItem) -> str:
    """``file.py:name`` of a marked launcher: the test module's attribute that holds it (what a worker imports)."""
    return f"{item.path}:{item.name}"


def ray_task(target: str, fuzz_kwargs: dict, sys_path: list) -> tuple[dict, dict, str]:
    """One Ray task: import the launcher, fuzz it into a temporary store, return (outcome, the store's files, the
    temporary store's path)."""
    import os
    import socket
    import sys

    import gpuemu
    from gpuemu.check.on_ray import in_temporary_store
    from gpuemu.target import load

    for p in reversed(sys_path):  # the driver's import path (rootdir, conftest folders) for the test module
        if p not in sys.path:
            sys.path.insert(0, p)

    def work(tmp: str) -> dict:
        # named as in a local run (fuzz describes the launcher), so records and replay lines are the same
        outcome = _outcome(gpuemu.fuzz(load(target), **dict(fuzz_kwargs, store=tmp)), tmp)
        outcome["properties"].append(("gpuemu_ray_worker", f"{socket.gethostname()}:{os.getpid()}"))
        return outcome

    return in_temporary_store(work)
