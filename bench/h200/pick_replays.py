"""Pick CPU-found corpus failures for the GPU replay: the first failure of each failing launcher, one launcher per
file, 10 in all (files in manifest order), written as `SEED TARGET` lines to bench/out/h200/replays.txt, their
records and input snapshots copied to a small store, bench/out/h200/replay-store (the whole one is too big to carry).

    python bench/h200/pick_replays.py [--json bench/out/h200/cpu-found.json] [-n 10]
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
        failure = k["failures"][0]
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
