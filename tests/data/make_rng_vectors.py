"""Regenerate tests/data/rng_vectors.json (only when the RNG spec changes on purpose: bump the case schema)."""

import hashlib
import json
from pathlib import Path

import torch

from gpuemu import cases, rng


def vectors() -> dict:
    s, sm = 1234567, []
    for _ in range(5):
        s, o = rng.splitmix64(s)
        sm.append(o)
    r = rng.Rng(0)
    xs = [r.next_u64() for _ in range(8)]
    raw = rng.raw_u64(42, rng.LANES * 2 + 4)
    case_hashes = {}
    for name, c in sample_cases().items():
        tensors, _ = cases.materialize(c)
        h = hashlib.sha256()
        for k in sorted(tensors):
            t = tensors[k]
            if t is not None:
                st = t.untyped_storage()
                h.update(torch.empty(0, dtype=torch.uint8).set_(st).numpy().tobytes())
        case_hashes[name] = h.hexdigest()
    return {
        "splitmix64_1234567": [str(v) for v in sm],
        "xorshift128p_seed0": [str(v) for v in xs],
        "raw_u64_block42_head": [str(int(v)) for v in raw[:4]],
        "raw_u64_block42_lane0_step1": [str(int(v)) for v in raw[rng.LANES:rng.LANES + 4]],
        "uniform01_block7": [float(v).hex() for v in rng.uniform01(7, 6)],
        "normal_block7": [float(v).hex() for v in rng.normal(7, 6)],
        "normal_tail_block7": [float(v).hex() for v in rng.normal(7, 50000)[::5000]],
        "derive_seed_99": [str(rng.derive_seed(99, i)) for i in range(4)],
        "case_sha256": case_hashes,
    }


def sample_cases() -> dict:
    return {
        "softmax_fp16_strided": cases.Case(op="softmax", dtype="fp16", dims={"N": 37}, seed=1, batch=(3,),
                                           layouts={"x": "strided"}, values="normal",
                                           value_params={"scale": 1.0}),
        "matmul_bf16_transposed": cases.Case(op="matmul", dtype="bf16", dims={"M": 5, "N": 7, "K": 9}, seed=2,
                                             layouts={"a": "transposed", "b": "offset"}, values="large_spread",
                                             value_params={"scale": 300.0}),
        "cross_entropy_fp32_spike": cases.Case(op="cross_entropy", dtype="fp32", dims={"N": 4, "C": 33}, seed=3,
                                               values="spike", value_params={"scale": 1.0, "spike": 60.0}),
    }


if __name__ == "__main__":
    out = Path(__file__).with_name("rng_vectors.json")
    out.write_text(json.dumps(vectors(), indent=2) + "\n")
    print(f"wrote {out}")
