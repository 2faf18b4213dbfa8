"""Self-check of the KernelBench-format problems in examples/kernelbench/ (dev aid, not part of gpuemu).

    TRITON_INTERPRET=1 python examples/kernelbench/_selfcheck.py [--plain] [problem-dir-substring ...]

Every problem directory holds problem.py (Model, get_inputs, get_init_inputs), solution.py (a correct
ModelNew) and solution_buggy.py (a ModelNew with one planted bug, plus trigger_inputs() and, where the bug
needs other sizes than the problem's, trigger_init_inputs()). For each problem:
  1. Model is built from get_init_inputs() (seed 0); both ModelNew are built from the same init inputs and
     load Model's state dict (strict: same parameter names and shapes); all three run on get_inputs()
     (seed 1); allclose = torch.allclose(new_out, model_out, atol=1e-2, rtol=1e-2), KernelBench's check;
  2. the correct solution's error on get_inputs() against Model evaluated in fp64 (deep copy, .double(),
     inputs upcast);
  3. at the trigger (Model rebuilt from trigger_init_inputs() when given, inputs from trigger_inputs(),
     seed 2): the errors of Model itself in fp32 ("field"), of the correct and of the buggy solution, all
     against the fp64 Model.
Errors are normwise: max|out - ref| / max|ref| over the finite reference entries, inf when the output has
NaN/inf where the reference is finite; integer outputs (argmax) give max|index difference|.
Pass: both allclose true; the correct solution within max(1e-5, 10 x field) at the example and at the
trigger; the buggy one above 100 x that bound at the trigger (integer outputs: 0 and > 0).
Kernels run under gpuemu's CPU runtime (this checkout's gpuemu.runtime.activate()), or under Triton's
bare interpreter with --plain. Exits non-zero when any problem fails.
"""
import copy
import importlib.util
import math
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

torch.set_num_threads(2)
HERE = Path(__file__).resolve().parent
sys.path.insert(1, str(HERE.parents[1]))   # this checkout's gpuemu, for its runtime


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def up(args):
    return [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def as_tuple(o):
    return tuple(o) if isinstance(o, (tuple, list)) else (o,)


def err(out, ref):
    worst = 0.0
    for o, r in zip(as_tuple(out), as_tuple(ref)):
        if not r.is_floating_point():
            worst = max(worst, (o.long() - r.long()).abs().max().item() if r.numel() else 0.0)
            continue
        o, r = o.double(), r.double()
        if o.shape != r.shape:
            return math.inf
        fin = torch.isfinite(r)
        if not torch.equal(torch.isfinite(o)[fin], fin[fin]):
            return math.inf
        if fin.any():
            worst = max(worst, ((o[fin] - r[fin]).abs().max() / r[fin].abs().max().clamp_min(1e-30)).item())
    return worst


def allclose(out, ref):
    return all(o.shape == r.shape and torch.allclose(o.to(r.dtype), r, atol=1e-2, rtol=1e-2)
               for o, r in zip(as_tuple(out), as_tuple(ref)))


def build(mod, init, state):
    m = mod.ModelNew(*init)
    m.load_state_dict(state, strict=True)
    return m


def check(d: Path):
    tag = d.name
    P = load(d / "problem.py", f"kb_{tag}_problem")
    S = load(d / "solution.py", f"kb_{tag}_solution")
    B = load(d / "solution_buggy.py", f"kb_{tag}_buggy")
    with torch.no_grad():
        torch.manual_seed(0)
        init = P.get_init_inputs()
        model = P.Model(*init)
        state = model.state_dict()
        new, bug = build(S, init, state), build(B, init, state)
        torch.manual_seed(1)
        inputs = P.get_inputs()
        ref = model(*inputs)
        out_new = new(*inputs)
        ac_new, ac_bug = allclose(out_new, ref), allclose(bug(*inputs), ref)
        ref64 = copy.deepcopy(model).double()(*up(inputs))
        e_field_ex, e_new_ex = err(ref, ref64), err(out_new, ref64)

        tinit = B.trigger_init_inputs() if hasattr(B, "trigger_init_inputs") else init
        torch.manual_seed(0)
        tmodel = P.Model(*tinit)
        tstate = tmodel.state_dict()
        torch.manual_seed(2)
        tin = B.trigger_inputs()
        tref64 = copy.deepcopy(tmodel).double()(*up(tin))
        e_field = err(tmodel(*tin), tref64)
        e_new = err(build(S, tinit, tstate)(*tin), tref64)
        e_bug = err(build(B, tinit, tstate)(*tin), tref64)
    integer = not as_tuple(ref)[0].is_floating_point()
    if integer:
        ok = ac_new and ac_bug and e_new_ex == 0 and e_new == 0 and e_bug > 0
    else:
        ok = (ac_new and ac_bug and e_new_ex <= max(1e-5, 10 * e_field_ex) and e_new <= max(1e-5, 10 * e_field)
              and e_bug > 100 * max(1e-5, 10 * e_field))
    return dict(problem=tag, ac_new=ac_new, ac_bug=ac_bug, e_new_ex=e_new_ex, e_field=e_field, e_new=e_new,
                e_bug=e_bug, ok=ok)


def main(filters):
    dirs = sorted(p for p in HERE.iterdir() if p.is_dir() and (p / "problem.py").exists())
    if filters:
        dirs = [d for d in dirs if any(f in d.name for f in filters)]
    rows, ok_all = [], True
    for d in dirs:
        t0 = time.time()
        try:
            r = check(d)
        except Exception:
            traceback.print_exc()
            r = dict(problem=d.name, ac_new=None, ac_bug=None, e_new_ex=math.nan, e_field=math.nan, e_new=math.nan,
                     e_bug=math.nan, ok=False)
        r["s"] = time.time() - t0
        ok_all &= r["ok"]
        rows.append(r)
        print(f"{r['problem']}: allclose correct={r['ac_new']} buggy={r['ac_bug']}  trigger err: field "
              f"{r['e_field']:.1e} correct {r['e_new']:.1e} buggy {r['e_bug']:.1e}  {r['s']:.1f}s", flush=True)
    print()
    print(f"| {'problem':32s} | allclose(correct) | allclose(buggy) | err correct @example | "
          f"err torch fp32 @trigger | err correct @trigger | err buggy @trigger | ok |")
    print(f"|{'-' * 34}|{'-' * 19}|{'-' * 17}|{'-' * 22}|{'-' * 25}|{'-' * 22}|{'-' * 20}|----|")
    for r in rows:
        print(f"| {r['problem']:32s} | {str(r['ac_new']):17s} | {str(r['ac_bug']):15s} | {r['e_new_ex']:20.1e} | "
              f"{r['e_field']:23.1e} | {r['e_new']:20.1e} | {r['e_bug']:18.1e} | {'ok' if r['ok'] else 'FAIL'} |")
    print(f"\n{sum(r['ok'] for r in rows)}/{len(rows)} problems pass")
    return 0 if ok_all else 1


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--plain" in argv:
        argv.remove("--plain")
        print("Triton's bare interpreter")
    else:
        import gpuemu.runtime
        gpuemu.runtime.activate()
        print("gpuemu runtime active")
    sys.exit(main(argv))
