"""Session L probe (bench/gpu_session_l.md): where did session K's device memory go? GPT-2 at large size in
bench/hook_real_model's pair mode (inductor model A and gpuemu model B in one process), each torch.compile check
printing the memory allocated before it, the peak during its real call and during its judge, and the memory left
allocated after it. On an OOM, or after the check named by --snapshot-at, the live blocks of PyTorch's memory
history are summed by the innermost frames in gpuemu/, bench/ or the model code, the 25 largest printed.

    python bench/h200/hook_mem_probe.py --steps 12    # on a GPU

(Session L's second call ran it on 05d4139 with row_local.plan_rows(cuda=False) forced: the chunked sums on, as
session K had them.)
"""
import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402

import hook_real_model as H  # noqa: E402

GiB = 2.0 ** 30


def summary(top: int = 25) -> str:
    snap = torch.cuda.memory._snapshot()
    groups: collections.Counter = collections.Counter()
    for seg in snap["segments"]:
        for blk in seg["blocks"]:
            if blk["state"] != "active_allocated":
                continue
            frames = blk.get("frames") or []
            mine = [f for f in frames if any(k in f["filename"] for k in ("gpuemu/", "bench/", "transformers/models"))]
            where = " < ".join(f"{Path(f['filename']).name}:{f['line']}:{f['name']}" for f in mine[:3]) or \
                " < ".join(f"{Path(f['filename']).name}:{f['line']}" for f in frames[:2]) or "(no frames)"
            groups[where] += blk["size"]
    lines = [f"  {b / GiB:8.2f} GiB  {w}" for w, b in groups.most_common(top)]
    return f"live blocks: {sum(groups.values()) / GiB:.2f} GiB\n" + "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--rate", type=float, default=0.3, help="the hook's sample rate (budget 1.0: every sampled call checked)")
    ap.add_argument("--snapshot-at", type=int, default=3, help="print the live blocks after this many checks")
    args = ap.parse_args()

    torch.cuda.memory._record_memory_history(max_entries=200000)
    from gpuemu.hook import pipeline

    run_check = pipeline.run_check
    n_checks = [0]

    def traced(rt, **kw):
        if kw["source"] != "torch.compile":
            return run_check(rt, **kw)
        call, judge = kw["call"], kw["judge"]
        peaks = {}

        def call_():
            torch.cuda.reset_peak_memory_stats()
            try:
                return call()
            finally:
                peaks["call"] = torch.cuda.max_memory_allocated()

        def judge_(chk, pre, out):
            torch.cuda.reset_peak_memory_stats()
            t = time.perf_counter()
            try:
                return judge(chk, pre, out)
            finally:
                peaks["judge"] = torch.cuda.max_memory_allocated()
                peaks["judge_s"] = time.perf_counter() - t
                peaks["kind"] = chk.kind
                peaks["verdict"] = getattr(chk.verdict, "status", None) if chk.verdict else chk.skip_reason

        before = torch.cuda.memory_allocated()
        try:
            return run_check(rt, **dict(kw, call=call_, judge=judge_))
        finally:
            n_checks[0] += 1
            print(f"check {n_checks[0]:3d} {kw['name']:28s} {peaks.get('kind', kw['kind']):24s} before "
                  f"{before / GiB:6.2f}  call peak {peaks.get('call', 0) / GiB:6.2f}  judge peak "
                  f"{peaks.get('judge', 0) / GiB:6.2f} ({peaks.get('judge_s', 0):.2f} s)  after "
                  f"{torch.cuda.memory_allocated() / GiB:6.2f} GiB  {str(peaks.get('verdict'))[:60]}", flush=True)
            if n_checks[0] == args.snapshot_at:
                print(summary(), flush=True)

    pipeline.run_check = traced
    cfg = H.RunConfig(model="gpt2", backend="gpuemu", device="cuda", steps=args.steps, evals=0, batch=args.batch,
                      seq=args.seq, pair=True, store="/tmp/hook-mem-store",
                      hook_settings={"sample_rate": args.rate, "budget": 1.0})
    try:
        out = H.run_pair(cfg)
    except torch.OutOfMemoryError as e:
        print(f"OOM: {str(e)[:300]}", flush=True)
        print(summary(), flush=True)
        return 1
    st = out.get("stats", {})
    print("by_source", st.get("checks_by_source"), "skips", st.get("skip_reasons"), "unchecked", st.get("outputs_unchecked"))
    print("divergences", len(out.get("divergences", [])), "errors", out.get("errors"))
    w = cfg.warmup
    a, b = out["step_s"][0][w:], out["step_s"][1][w:]
    if a and b:
        print(f"step median A {sorted(a)[len(a) // 2] * 1e3:.1f} ms  B {sorted(b)[len(b) // 2] * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
