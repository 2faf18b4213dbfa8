"""Launches a GPU would refuse: shared memory, threads per block, as Triton's launcher checks them.

Triton refuses a launch before it reaches the GPU (``CompiledKernel._init_handles``, Triton 3.x):

- ``metadata.shared > max_shared_mem(device)`` -> ``OutOfResources(shared, max, "shared memory")``. The
  figure is the dynamic shared memory the compiled kernel asks for, which depends on every constexpr (block
  sizes), ``num_warps``, ``num_stages`` and the target; the limit is the device's opt-in maximum per block
  (232,448 B on sm_90, 166,912 B on sm_80).
- ``num_warps * 32 > n_max_threads`` -> ``OutOfResources(threads, n_max_threads, "threads")``, where
  ``n_max_threads`` is CUDA's ``MAX_THREADS_PER_BLOCK`` for the loaded function: 1024, or fewer when the
  registers the function uses do not fit 64K per block.

On the CPU, :func:`guard` compiles each launch for the chosen targets with the launch's own arguments and
options (Triton's binder, specialisation and cache key; see ``compile_launch(limits_only=True)`` in
:mod:`gpuemu.runtime.aot`: as far as LLVM IR, where Triton fixes the shared memory figure, once per
specialisation, and kept on disk beside Triton's cache) and raises :class:`LaunchRefused` before the launch runs, with the figures Triton would
report. On CUDA, :func:`from_out_of_resources` turns the ``OutOfResources`` the real launch raised into the
same :class:`LaunchRefused`, so both devices give the same ERROR verdict, word for word.

Why the lint's 98,304 B was a third of the 294,912 B the H200 refused: examples/kernels/attention.py takes
BLOCK_N = next_pow2(Nk) and BLOCK_D = next_pow2(D), and its shared memory is the q tile plus the k and v
tiles. Compiled here for sm_90 (Triton 3.8) at D=257 fp32: 98,304 B with <= 16 keys (BLOCK_N=16, the lint's
launch), 294,912 B with 33..64 keys (BLOCK_N=64), both at num_warps=4, num_stages=3: the launch's block
sizes made the difference, not num_stages. So the prediction compiles each launch as it is made.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

DEFAULT_TARGETS = ("sm_80", "sm_90")  # A100 and H100/H200: the predictions a CPU fuzz makes unless told otherwise
MAX_THREADS_PER_BLOCK = 1024
REGISTERS_PER_BLOCK = 65536
REGISTER_ALLOC_UNIT = 256  # registers are granted per warp in chunks of this many

_local = threading.local()


@dataclass(frozen=True)
class Refusal:
    """One resource a launch needs beyond what ``target`` allows."""

    kernel: str
    target: str
    resource: str  # "shared memory" | "threads" | Triton's name for another resource
    required: int
    limit: int
    options: dict[str, Any] = field(default_factory=dict)  # num_warps, num_stages, registers (when read)
    at_least: bool = False  # ``required`` is a lower bound (read from TTGIR, see shared_lower_bound)

    def message(self) -> str:
        """``_attn_kernel needs 294,912 B shared memory on sm_90, limit 232,448``"""
        unit = {"shared memory": " B shared memory", "threads": " threads per block",
                "block elements": " elements in one block"}.get(self.resource, f" {self.resource}")
        return (f"{self.kernel} needs {'at least ' if self.at_least else ''}{self.required:,}{unit} on "
                f"{self.target}, limit {self.limit:,}")

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "target": self.target, "resource": self.resource, "required": self.required,
                "limit": self.limit, "options": dict(self.options), "at_least": self.at_least}


class LaunchRefused(Exception):
    """A launch the GPU refuses (or would refuse) for lack of a resource.

    Not a GpuemuError: like ``KernelFinding`` it is a verdict about the kernel's launch. The oracle turns it
    into an ERROR verdict of kind ``out_of_resources`` whose message is the same on the CPU (``predicted``)
    and on CUDA (raised by the launch).
    """

    def __init__(self, refusals: Sequence[Refusal], *, predicted: bool, note: str = "") -> None:
        self.refusals = tuple(refusals)
        self.predicted = predicted
        self.note = note
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return "; ".join(r.message() for r in self.refusals)

    @property
    def detail(self) -> str:
        opts = ", ".join(f"{k}={v}" for k, v in self.refusals[0].options.items()) if self.refusals else ""
        if self.predicted:
            where = ", ".join(dict.fromkeys(r.target for r in self.refusals))
            how = (f"predicted without a GPU: compiled for {where} with the launch's own arguments and options"
                   f"{' (' + opts + ')' if opts else ''}; Triton refuses such a launch with OutOfResources")
        else:
            how = "raised by the CUDA launch (triton OutOfResources)"
        if self.refusals and all(r.resource == "block elements" for r in self.refusals):
            how = ("refused by Triton's compiler, on any target: a block (one tl.arange or tile) may hold at most "
                   f"{self.refusals[0].limit:,} elements")
        return how + (f"\n{self.note}" if self.note else "")


# ---------------------------------------------------------------------------------------------- targets


def parse_targets(spec: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"sm_80,sm_90"`` -> ("sm_80", "sm_90"); "none" or "" -> () (no prediction); None -> the defaults.

    >>> parse_targets("sm_90, sm_80")
    ('sm_90', 'sm_80')
    """
    if spec is None:
        return DEFAULT_TARGETS
    if isinstance(spec, str):
        if spec.strip().lower() in ("", "none", "off"):
            return ()
        names = [s for s in spec.replace(" ", "").split(",") if s]
    else:
        names = [str(s) for s in spec]
    from .lint.targets import get

    return tuple(dict.fromkeys(get(n).name for n in names))


@contextlib.contextmanager
def predicting(targets: str | Sequence[str] | None) -> Iterator[tuple[str, ...]]:
    """CPU runs inside the block predict refusals for ``targets`` (``()`` or "none": no prediction).

    >>> with predicting("sm_90") as t:
    ...     t
    ('sm_90',)
    """
    names = parse_targets(targets)
    old = getattr(_local, "targets", None)
    _local.targets = names
    try:
        yield names
    finally:
        _local.targets = old


def project_targets(fuzz_settings: Any) -> Any:
    """The block predicting for the rule pack's ``fuzz.targets`` (gpuemu.yaml: ``fuzz: {targets: [sm_90]}``), unless
    a caller already chose (``gpuemu fuzz --target``, an enclosing :func:`predicting`): every entry point (the CLI,
    ``gpuemu check``, the pytest plugin, the API) predicts for the GPUs the project ships to."""
    chosen = fuzz_settings.get("targets") if hasattr(fuzz_settings, "get") else None
    if chosen is None or getattr(_local, "targets", None) is not None:
        return contextlib.nullcontext(current_targets())
    return predicting(chosen)


def current_targets() -> tuple[str, ...]:
    """The targets CPU runs predict refusals for on this thread: :func:`predicting`'s, else the defaults."""
    t = getattr(_local, "targets", None)
    return DEFAULT_TARGETS if t is None else t


# ---------------------------------------------------------------------------------------------- checking


def check_compiled(compiled: Any, target: str) -> list[Refusal]:
    """What Triton's launcher would refuse for a :class:`gpuemu.runtime.CompiledLaunch` on ``target``."""
    from .lint.targets import get

    t = get(target)
    meta = compiled.metadata
    num_warps = int(meta.get("num_warps", 4) or 4)
    opts: dict[str, Any] = {"num_warps": num_warps}
    if meta.get("num_stages") is not None:
        opts["num_stages"] = meta.get("num_stages")
    out: list[Refusal] = []
    shared = int(meta.get("shared", 0) or 0)
    if shared > t.max_shared_per_block:
        out.append(Refusal(compiled.kernel, t.name, "shared memory", shared, t.max_shared_per_block, opts,
                           at_least=bool(meta.get("shared_is_lower_bound"))))
    threads = num_warps * 32
    max_threads = MAX_THREADS_PER_BLOCK
    if threads * 255 > REGISTERS_PER_BLOCK and compiled.asm.get("cubin"):
        regs = registers(compiled)  # only a block of > 8 warps can run out of registers (255 each at most)
        if regs:
            opts["registers"] = regs
            max_threads = min(max_threads, max_threads_for(regs))
    if threads > max_threads:
        out.append(Refusal(compiled.kernel, t.name, "threads", threads, max_threads, opts))
    return out


def max_threads_for(registers_per_thread: int) -> int:
    """CUDA's MAX_THREADS_PER_BLOCK for a function using ``registers_per_thread`` (64K registers per block,
    granted per warp in units of 256).

    >>> max_threads_for(64), max_threads_for(128), max_threads_for(255)
    (1024, 512, 256)
    """
    per_warp = -(-registers_per_thread * 32 // REGISTER_ALLOC_UNIT) * REGISTER_ALLOC_UNIT
    return min(MAX_THREADS_PER_BLOCK, (REGISTERS_PER_BLOCK // per_warp) * 32)


def registers(compiled: Any) -> int | None:
    """Registers per thread of a compiled launch, from its cubin (cuobjdump); None when unreadable."""
    try:
        from .lint.artifacts import parse_resource_usage
        from .lint.tools import resource_usage

        res = parse_resource_usage(resource_usage(compiled.asm["cubin"]))
        entry = res.get(compiled.kernel) or (next(iter(res.values())) if len(res) == 1 else {})
        return int(entry.get("REG", 0)) or None
    except Exception:  # no cuobjdump: the thread check falls back to the 1024 limit
        return None


def predict(kernel: Any, args: tuple, kwargs: dict, targets: Sequence[str]) -> list[Refusal]:
    """Compile the launch ``kernel[grid](*args, **kwargs)`` for each target (cached per specialisation) and
    return what Triton would refuse there. A launch that does not compile is not predicted (the lint's
    business): it is returned as no refusal."""
    from .lint.targets import get
    from .runtime.aot import compile_launch, parse_target

    out: list[Refusal] = []
    for name in targets:
        target = parse_target(name)
        compiled = compile_launch(kernel, args, kwargs, target, target_name=name, limits_only=True,
                                  early=_early_judge(get(name).max_shared_per_block))
        if compiled.error is not None:
            continue
        if int(compiled.metadata.get("num_warps", 4) or 4) * 32 * 255 > REGISTERS_PER_BLOCK:
            # a block this large can run out of registers: they are in the cubin, so compile in full
            compiled = compile_launch(kernel, args, kwargs, target, target_name=name, cache=True)
            if compiled.error is not None:
                continue
        out.extend(check_compiled(compiled, name))
    return out


HUGE_TENSOR = 1 << 15  # elements: above this, lowering to LLVM IR takes from tens of seconds to minutes


def _early_judge(limit: int):
    """For ``compile_launch(early=)``: a kernel whose largest tensor has more than HUGE_TENSOR elements and
    whose TTGIR already shows more shared memory than ``limit`` is judged there ("at least" that figure),
    not lowered further: measured here, the corpus attention at BLOCK_N=8192 took 290 s to reach LLVM IR."""

    def judge(ttgir: str) -> dict | None:
        bound, largest = shared_lower_bound(ttgir)
        if bound > limit and largest > HUGE_TENSOR:
            return {"shared": bound, "shared_is_lower_bound": True}
        return None

    return judge


_ALLOC = re.compile(r"^\s*(%[\w.$-]+)\s*=\s*ttg\.local_alloc\b.*?->\s*!ttg\.memdesc<([0-9x]+)x(\w+)")
_ALIAS = re.compile(r"^\s*(%[\w.$-]+)\s*=\s*ttg\.memdesc_\w+\s+(%[\w.$-]+)")
_NAME = re.compile(r"%[\w.$-]+")
_TENSOR = re.compile(r"tensor<([0-9]+(?:x[0-9]+)*)x\w")
_BYTES = {"f64": 8, "i64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i16": 2, "i8": 1, "i1": 1}


def shared_lower_bound(ttgir: str) -> tuple[int, int]:
    """(a lower bound on the shared memory of a TTGIR module, its largest tensor's element count).

    The bound: ``ttg.local_alloc`` buffers (and their aliases, e.g. ``memdesc_trans``) whose spans, from
    allocation to last textual use, overlap must be disjoint in shared memory, as Triton's allocator lays
    them out over the same op order; the largest overlapping sum is a lower bound (Triton adds scratch for
    layout conversions and reductions, and padding, on top).

    >>> ir = '''
    ... %a = ttg.local_alloc %x : (tensor<64x512xf32, #b>) -> !ttg.memdesc<64x512xf32, #s, #smem>
    ... %t = ttg.memdesc_trans %a {order = array<i32: 1, 0>} : !ttg.memdesc<64x512xf32, #s, #smem> -> !ttg.memdesc<512x64xf32, #s1, #smem>
    ... %b = ttg.local_alloc %y : (tensor<16x512xf32, #b>) -> !ttg.memdesc<16x512xf32, #s, #smem>
    ... %u = ttg.local_load %t : !ttg.memdesc<512x64xf32, #s1, #smem> -> tensor<512x64xf32, #d>
    ... '''
    >>> shared_lower_bound(ir)
    (163840, 32768)
    """
    size: dict[str, int] = {}
    start: dict[str, int] = {}
    last: dict[str, int] = {}
    root: dict[str, str] = {}
    largest = 0
    for i, line in enumerate(ttgir.splitlines()):
        for m in _TENSOR.finditer(line):
            n = 1
            for d in m.group(1).split("x"):
                n *= int(d)
            largest = max(largest, n)
        a = _ALLOC.match(line)
        if a:
            n = _BYTES.get(a.group(3), 1 if a.group(3).startswith("f8") else 4)
            for d in a.group(2).split("x"):
                n *= int(d)
            name = a.group(1)
            size[name], start[name], last[name], root[name] = n, i, i, name
            continue
        al = _ALIAS.match(line)
        if al and al.group(2) in root:
            root[al.group(1)] = root[al.group(2)]
        head, eq, rest = line.partition("=")
        used = rest if eq and "ttg." not in head and "tt." not in head else line
        for nm in _NAME.findall(used):
            r = root.get(nm)
            if r is not None:
                last[r] = i
    events = sorted([(start[n], size[n]) for n in size] + [(last[n] + 1, -size[n]) for n in size],
                    key=lambda e: (e[0], e[1]))
    live = best = 0
    for _, delta in events:
        live += delta
        best = max(best, live)
    return best, largest


def _multi_config_autotuner_on_stack(depth: int = 24) -> bool:
    """Inside ``Autotuner.run`` with several configs: on a GPU the autotuner prunes a refused config itself
    (its benchmark catches OutOfResources), so a single launch's refusal is not the verdict."""
    f = sys._getframe(2)
    for _ in range(depth):
        if f is None:
            return False
        if f.f_code.co_name in ("run", "_bench"):
            tuner = f.f_locals.get("self")
            if type(tuner).__name__ == "Autotuner" and len(getattr(tuner, "configs", ()) or ()) > 1:
                return True
        f = f.f_back
    return False


def guard(kernel: Any, args: tuple, kwargs: dict) -> None:
    """Before a CPU launch: raise :class:`LaunchRefused` when a target of :func:`current_targets` would
    refuse it. Installed by :func:`gpuemu.runners.run_launcher` around CPU runs."""
    targets = current_targets()
    if not targets or _multi_config_autotuner_on_stack():
        return
    try:
        refusals = predict(kernel, args, kwargs, targets)
    except Exception:  # a prediction that cannot be made leaves the CPU run as it was (compile errors are lint's)
        return
    if refusals:
        raise LaunchRefused(refusals, predicted=True)


# ---------------------------------------------------------------------------------------------- on CUDA


def is_out_of_resources(e: BaseException | None) -> bool:
    return e is not None and type(e).__name__ == "OutOfResources" and hasattr(e, "required") and hasattr(e, "limit")


def from_out_of_resources(e: BaseException, *, kernel: str, device: Any = None) -> LaunchRefused:
    """The :class:`LaunchRefused` for Triton's ``OutOfResources`` raised by a real launch of ``kernel``."""
    target = cuda_target_name(device)
    name = str(getattr(e, "name", "resource"))
    r = Refusal(kernel, target, name, int(getattr(e, "required", 0)), int(getattr(e, "limit", 0)))
    return LaunchRefused([r], predicted=False, note=f"triton: {e}")


_NUMEL = re.compile(r"numel \((\d+)\) exceeds triton maximum tensor numel \((\d+)\)")


def block_too_large(e: BaseException, *, kernel: str) -> LaunchRefused | None:
    """The :class:`LaunchRefused` for Triton's own refusal of a block past its largest (2^20 elements,
    ``numel (2097152) exceeds triton maximum tensor numel (1048576)``, raised while compiling on a GPU and while
    tracing on the CPU runtime), or None for any other error. Loud on every device, like a launch a GPU refuses:
    a LIMIT, not a wrong result."""
    seen, text = set(), []
    while e is not None and id(e) not in seen:  # (the message may sit in a wrapped cause)
        seen.add(id(e))
        text.append(str(e))
        e = e.__cause__ or e.__context__
    m = _NUMEL.search("\n".join(text))
    if m is None:
        return None
    r = Refusal(kernel, "Triton", "block elements", int(m.group(1)), int(m.group(2)))
    return LaunchRefused([r], predicted=False)


def cuda_target_name(device: Any = None) -> str:
    """``sm_90`` for the current (or given) CUDA device; ``cuda`` when unknown."""
    try:
        import torch

        major, minor = torch.cuda.get_device_capability(device)
        return f"sm_{major}{minor}"
    except Exception:
        return "cuda"


__all__ = ["Refusal", "LaunchRefused", "DEFAULT_TARGETS", "predicting", "current_targets", "parse_targets",
           "predict", "check_compiled", "guard", "from_out_of_resources", "is_out_of_resources", "max_threads_for",
           "block_too_large"]
