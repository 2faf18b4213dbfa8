"""Pick CPU-found corpus failures for the GPU replay: the first failure of each failing launcher that a GPU can
determine, one launcher per file, 10 in all (files in manifest order), written as `SEED TARGET` lines to
bench/out/h200/replays.txt, their records and input snapshots copied to a small store, bench/out/h200/replay-store
(the whole one is too big to carry).

A failure whose inputs lie past the CUDA value envelope of its op (gpuemu.device_arith.undetermined: softmax-like
logits past 2^24/log2 e, where a GPU's FMA-contracted exp2 does not determine the result) is passed over for the
launcher's next stored failure; each one passed over is printed, so the pick is not a silent filter.

    python bench/h200/pick_replays.py [--json bench/out/h200/cpu-found.json] [-n 10]
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _determined_on_cuda(failure: dict) -> bool:
    """The failure's stored inputs are inside the CUDA value envelope of its op (printed where not)."""
    from gpuemu.device_arith import undetermined
    from gpuemu.store import decode_tensors

    rec = json.loads(Path(failure["record"]).read_text())
    snapshot = Path(failure["record"]).parent.parent / "snapshots" / Path(rec["snapshot"]["path"]).name
    why = undetermined(rec["op"], decode_tensors(snapshot.read_bytes()), "cuda")  # (a snapshot holds the inputs)
    if why:
        print(f"passed over: 0x{failure['case']['seed']:016x} {rec['target'].split('/')[-1]}: {why}")
    return why is None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=str(ROOT / "bench/out/h200/cpu-found.json"))
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "bench/out/h200/replays.txt"))
    ap.add_argument("--store", default=str(ROOT / "bench/out/h200/replay-store"))
    args = ap.parse_args()
    report = json.loads(Path(args.json).read_text())
    picked, files = [], set()
    for k in report["kernels"]:
        if not k["failures"] or k["status"] != "fail":
            continue
        file = k["target"].split(":")[0]
        if file in files:
            continue
        files.add(file)
        failure = next((f for f in k["failures"] if _determined_on_cuda(f)), None)
        if failure is None:
            continue
        seed = failure["case"]["seed"]
        record = Path(failure["record"])
        for sub, src in (("failures", record),
                         ("snapshots", record.parent.parent / "snapshots" /
                          Path(json.loads(record.read_text())["snapshot"]["path"]).name)):
            (Path(args.store) / sub).mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, Path(args.store) / sub / src.name)
        target = k["target"][k["target"].index("examples/"):]
        picked.append(f"0x{seed:016x} {target}")
        if len(picked) == args.n:
            break
    Path(args.out).write_text("\n".join(picked) + "\n")
    print("\n".join(picked))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
