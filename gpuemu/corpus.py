"""The example corpus: launchers listed in ``examples/kernels/manifest.yaml``, correct and buggy.

Used by the benchmark, the tests and the tour. A correct launcher with ``expect: precondition`` assumes
something its callers guarantee and says so nowhere (gpuemu must give it PRECONDITION verdicts, never a
FAIL); one with ``expect: rejects`` refuses such input with a clear exception (gpuemu must pass it, counting
the refusals). Either is correct when a run has no FAIL or ERROR (``FuzzResult.failed`` is empty). ``allclose_verdict`` is the field-standard check the
corpus's buggy kernels are built to pass: ``torch.allclose(out, ref, atol=1e-2, rtol=1e-2)`` at one
power-of-two shape on randn inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .errors import InvalidArgument


@dataclass(frozen=True)
class Entry:
    target: str
    op: str
    correct: bool
    bug: str | None = None
    note: str = ""
    allclose_shapes: dict = field(default_factory=dict)
    allclose_kwargs: dict = field(default_factory=dict)
    trigger: str = ""
    expect: str = ""  # for a correct launcher with a known contract: "precondition" or "rejects" (see below)
    fit: bool = True  # a tolerance control of `gpuemu calibrate --corpus` (false: judged against the fit only)
    strategy: str = ""  # "production:PRESET": judged at production size (gpuemu/sizes.py; examples/kernels/overflow)

    def verdict_ok(self, result) -> bool:
        """Whether a fuzz result is what this entry should get: no failure at all, or for an ``expect`` entry
        no FAIL or ERROR (its PRECONDITION verdicts and refusals are the expected outcome)."""
        return not result.failed if self.expect else result.ok

    @property
    def name(self) -> str:
        return self.target.rsplit(":", 1)[-1]


def default_manifest() -> Path:
    here = Path.cwd() / "examples" / "kernels" / "manifest.yaml"
    if here.is_file():
        return here
    return Path(__file__).resolve().parent.parent / "examples" / "kernels" / "manifest.yaml"


def load_manifest(path: str | Path | None = None) -> list[Entry]:
    import yaml

    path = Path(path) if path else default_manifest()
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise InvalidArgument(f"{path}: cannot read the corpus manifest: {e}") from None
    out = []
    for i, d in enumerate(doc or []):
        try:
            out.append(Entry(target=d["target"], op=d["op"], correct=bool(d["correct"]), bug=d.get("bug"),
                             note=d.get("note", ""), allclose_shapes=d.get("allclose_shapes") or {},
                             allclose_kwargs=d.get("allclose_kwargs") or {}, trigger=str(d.get("trigger", "")),
                             expect=str(d.get("expect", "")), fit=bool(d.get("fit", True)),
                             strategy=str(d.get("strategy", ""))))
        except KeyError as e:
            raise InvalidArgument(f"{path}: entry {i}: missing key {e}") from None
    return out


def resolve_target(entry: Entry, root: Path | None = None) -> str:
    """The entry's target with its file path made absolute against the repo root."""
    root = root or default_manifest().parent.parent.parent
    file, _, fn = entry.target.rpartition(":")
    return f"{(root / file).resolve()}:{fn}"


def allclose_inputs(entry: Entry, seed: int = 0) -> dict[str, Any]:
    """randn fp32 inputs at the entry's allclose shapes (index arguments uniform in range)."""
    import torch

    from . import ops

    spec = ops.get(entry.op)
    shapes = {k: tuple(v) for k, v in entry.allclose_shapes.items()}
    dims: dict[str, int] = {}
    for a in spec.args:
        if a.name in shapes:
            got = shapes[a.name]
            named = [d for d in a.shape if d != "..."]
            for d, s in zip(named, got[len(got) - len(named):]):
                if not d.endswith("/2"):
                    dims.setdefault(d, s)
    g = torch.Generator().manual_seed(seed)
    out: dict[str, Any] = {}
    for a in spec.args:
        if a.name not in shapes:
            out[a.name] = None
        elif a.kind == "index":
            out[a.name] = torch.randint(0, dims[a.index_of], shapes[a.name], generator=g)
        else:
            out[a.name] = torch.randn(shapes[a.name], generator=g)
    return out


def allclose_verdict(entry: Entry, fn: Callable | None = None) -> tuple[bool, float, dict]:
    """(passes allclose, max abs err, shapes) of the field-standard check at the entry's shape."""
    import torch

    from . import ops
    from .oracle import reference, to_reference_inputs
    from .target import load

    spec = ops.get(entry.op)
    fn = fn or load(resolve_target(entry))
    inputs = allclose_inputs(entry)
    args = [inputs[a.name] for a in spec.args]
    out = fn(*args, **entry.allclose_kwargs)
    ref, _ = reference(spec, to_reference_inputs(spec, inputs), entry.allclose_kwargs)
    if spec.out_kind == "index":
        return bool(torch.equal(out.cpu(), ref)), float((out.cpu() - ref).abs().max()), entry.allclose_shapes
    o = out.detach().double().cpu()
    ok = bool(torch.allclose(o, ref, atol=1e-2, rtol=1e-2))
    return ok, float((o - ref).abs().max()), entry.allclose_shapes
