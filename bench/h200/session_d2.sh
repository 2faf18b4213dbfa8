#!/usr/bin/env bash
# H200 (or H100), call 2 of session D (bench/h200/README.md).
# Phase 1, alone and cold (empty Triton cache): the whole corpus with its controls, the whole-K matmul the GPU refuses
# included, `gpuemu check --device cuda -n 100 -j 16` (issue 37: LIMIT lines, 0 failures on correct kernels, every
# bug caught, wall time and where the warm-up's compiles went).
# Phase 2, all at once: the 8 kernel families against their references (issue 35: buggy twins 100 iterations,
# correct twins 300 per dtype; each run appended to fam-*.json.partial.jsonl as it ends), the KernelBench-format
# problems, 10 CPU-found corpus failures replayed with `gpuemu reproduce --device cuda`, and the refusal control
# fuzzed alone (exit 0 with its envelope; exit 1 with --supports all).
# Results: $OUT/d2.tgz (small files only).
set -u
export TRITON_CACHE_DIR=/tmp/tc-d2
rm -rf /tmp/tc-d2
source bench/h200/common.sh /tmp/resd2
SECONDS=0
timeout ${TC:-180} $G check --manifest examples/kernels/manifest.yaml --device cuda -n 100 --seed 1 -j 16 \
  --store /tmp/corpus-store --json $R/corpus.json > $R/corpus.log 2>&1
echo "corpus: exit $? in ${SECONDS} s (cold cache, -j 16)" > $R/phase.txt
tar czf $OUT/d2a.tgz -C /tmp resd2
SECONDS=0
T=${TF:-360}
for f in int8_gemm fp8_gemm moe_gemm gqa_attention paged_decode add_rmsnorm rope_pos masked_softmax; do
  timeout $T python3 bench/reference_bench.py --device cuda --only families --correct 300 --bugs 100 \
    --store /tmp/fam-store-$f --out $R/fam-$f.md --json $R/fam-$f.json $f > $R/fam-$f.log 2>&1 &
done
timeout $T python3 bench/reference_bench.py --device cuda --only kernelbench --correct 100 --bugs 100 \
  --store /tmp/kb-store --out $R/kb.md --json $R/kb.json > $R/kb.log 2>&1 &
( S=bench/out/h200/replay-store
  while read -r seed target; do
    echo "== $seed $target"
    timeout 60 $G reproduce $seed --store $S --target $target --device cuda
    echo "exit $?"
  done < bench/out/h200/replays.txt > $R/replays.log 2>&1
  for extra in "" "--supports all"; do
    echo "== matmul_whole_k $extra"
    timeout 100 $G fuzz examples/kernels/limits.py:matmul_whole_k --op matmul -n 100 --seed 1 --device cuda \
      --store /tmp/lim-store $extra
    echo "exit $?"
  done > $R/limits.log 2>&1 ) &
wait
echo "phase 2: ${SECONDS} s" >> $R/phase.txt
tar czf $OUT/d2.tgz -C /tmp resd2 --exclude='*.partial.jsonl.tmp'
