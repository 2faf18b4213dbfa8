"""The check the field trusts: torch.allclose on one power-of-two shape, randn inputs, one seed.

    python examples/allclose_check.py examples/kernels/softmax.py:softmax_tail_leak --op softmax

Uses the shapes the corpus manifest names for the target (or [64, 256]-style defaults) and prints
what allclose says, so the tour can show a kernel that passes it and is still wrong.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def main() -> int:
    from gpuemu.corpus import allclose_verdict, load_manifest

    p = argparse.ArgumentParser()
    p.add_argument("target")
    p.add_argument("--op", required=True)
    a = p.parse_args()
    entry = next((e for e in load_manifest() if e.target == a.target), None)
    if entry is None:
        print(f"{a.target} is not in examples/kernels/manifest.yaml", file=sys.stderr)
        return 2
    ok, err, shapes = allclose_verdict(entry)
    print(f"torch.allclose(out, ref, atol=1e-2, rtol=1e-2) at {shapes} on randn fp32: {ok} (max abs err {err:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
