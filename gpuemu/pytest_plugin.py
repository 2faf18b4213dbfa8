"""pytest plugin (entry point ``pytest11``): one line per launcher fuzzes it against the op's fp64 oracle.

Two spellings::

    # a marker on the launcher itself, in a test module: collected as the test item ``softmax``
    softmax = pytest.mark.gpuemu(op="softmax")(kernels.softmax)

    # or the fixture, inside any test
    def test_softmax(gpuemu_fuzz):
        gpuemu_fuzz(kernels.softmax, op="softmax", iterations=50)

A failure shows the FAIL line, the mismatch report and the replay command (also in the JUnit XML pytest
writes, with the seed and replay as testcase properties). Options: ``--gpuemu-iterations``,
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

_MARK_KEYS = {"op", "iterations", "seed", "dtypes", "strategy", "rulepack", "max_failures"}


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
    if mark.args:
        if len(mark.args) == 1 and "op" not in mark.kwargs:
            kw = dict(mark.kwargs, op=mark.args[0])
        else:
            raise pytest.UsageError(f"{where}: @pytest.mark.gpuemu takes op as its only positional argument")
    else:
        kw = dict(mark.kwargs)
    unknown = set(kw) - _MARK_KEYS
    if unknown:
        raise pytest.UsageError(f"{where}: @pytest.mark.gpuemu got unknown keyword {sorted(unknown)[0]!r}; "
                                f"allowed: {', '.join(sorted(_MARK_KEYS))}")
    return kw


def _seed(config, nodeid: str, given: Any) -> int | None:
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
    if not op:
        raise pytest.UsageError(f"{nodeid}: gpuemu needs op=..., e.g. @pytest.mark.gpuemu(op='softmax')")
    device = config.getoption("gpuemu_device")
    return dict(op=op, iterations=config.getoption("gpuemu_iterations") or kw.get("iterations"),
                seed=_seed(config, nodeid, kw.get("seed")), dtypes=kw.get("dtypes"), strategy=kw.get("strategy"),
                store=config.getoption("gpuemu_store"), rulepack=kw.get("rulepack") or (),
                device=None if device == "auto" else device, max_failures=kw.get("max_failures"))


def _outcome(result: Any, store: str | None) -> dict:
    """What pytest shows of a fuzz result: ``status`` (passed, failed, skipped), the ``message`` and the JUnit
    properties. Plain data, so a Ray task can send it back."""
    op = result.op
    props = [("gpuemu_seed", f"0x{result.seed:x}"), ("gpuemu_summary", result.summary())]
    passing = {"pass", "rejected"}
    bad = [f for f in result.failures if f.verdict.status not in passing]
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


def _report(outcome: dict, user_properties: list) -> None:
    user_properties.extend(tuple(p) for p in outcome["properties"])
    if outcome["status"] == "failed":
        raise GpuemuFailure(outcome["message"])
    if outcome["status"] == "skipped":
        pytest.skip(outcome["message"])


def _run(config, nodeid: str, fn: Callable, kw: dict, user_properties: list) -> Any:
    import gpuemu

    fkw = _fuzz_kwargs(config, nodeid, kw)
    result = gpuemu.fuzz(fn, **fkw)
    _report(_outcome(result, fkw["store"]), user_properties)
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
        if isinstance(excinfo.value, GpuemuFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        import inspect

        try:
            line = inspect.getsourcelines(self.launcher)[1] - 1
        except (OSError, TypeError):
            line = None
        return self.path, line, f"gpuemu {self.kwargs.get('op')}: {self.name}"


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name: str, obj: Any):
    """Collect launchers marked @pytest.mark.gpuemu in a test module (test functions are left to pytest)."""
    if not callable(obj) or isinstance(obj, type) or collector.funcnamefilter(name):
        return None
    marks = [m for m in getattr(obj, "pytestmark", []) if getattr(m, "name", None) == "gpuemu"]
    if not marks:
        return None
    kw = _mark_kwargs(marks[-1], f"{collector.nodeid}::{name}")
    return GpuemuItem.from_parent(collector, name=name, launcher=obj, kwargs=kw)


@pytest.fixture
def gpuemu_fuzz(request) -> Callable[..., Any]:
    """``gpuemu_fuzz(launcher, op=..., **options)`` fuzzes and fails the test with the gpuemu report.

    Options default to a ``@pytest.mark.gpuemu(...)`` on the test, then the command-line options.
    Returns the FuzzResult when every case passed.
    """
    marks = [m for m in request.node.iter_markers("gpuemu")]
    base = _mark_kwargs(marks[0], request.node.nodeid) if marks else {}
    props = request.node.user_properties

    def run(launcher: Callable, op: str | None = None, **options: Any):
        unknown = set(options) - _MARK_KEYS
        if unknown:
            raise pytest.UsageError(f"gpuemu_fuzz got unknown option {sorted(unknown)[0]!r}; "
                                    f"allowed: {', '.join(sorted(_MARK_KEYS - {'op'}))}")
        kw = dict(base, **options)
        if op is not None:
            kw["op"] = op
        try:
            return _run(request.config, request.node.nodeid, launcher, kw, props)
        except GpuemuFailure as e:
            pytest.fail(str(e), pytrace=False)

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
