#!/usr/bin/env bash
# H200 (or H100), call 3 of session D (bench/h200/README.md). Phase 1, all at once: the whole corpus with its controls
# (the softmax the GPU refuses past N = 512 included; `gpuemu check --device cuda -n 100 -j 12`), the four kernel
# families call 2 left unfinished (int8 GEMM with its reference fixed for CUDA, fp8 GEMM and paged decode with their
# failure stores kept for a CPU replay, GQA), KernelBench problems 12-22 one process each (an illegal memory access
# ends a process's CUDA context), and the refusal control alone (exit 0 with its envelope; exit 1 with
# --supports all). Phase 2, alone: GPT-2 with its LM head through the hook at batch 64 x 256.
# Results: $OUT/d3.tgz after phase 1, $OUT/d3h.tgz after phase 2 (small files only).
set -u
export TRITON_CACHE_DIR=/tmp/tc-d3
source bench/h200/common.sh /tmp/resd3
T=${T1:-320}
SECONDS=0
timeout $T $G check --manifest examples/kernels/manifest.yaml --device cuda -n 100 --seed 1 -j 12 \
  --store /tmp/corpus-store --json $R/corpus.json > $R/corpus.log 2>&1 &
for f in int8_gemm fp8_gemm paged_decode gqa_attention; do
  timeout $T python3 bench/reference_bench.py --device cuda --only families --correct 300 --bugs 100 \
    --store $R/fam-store-$f --out $R/fam-$f.md --json $R/fam-$f.json $f > $R/fam-$f.log 2>&1 &
done
kb() { for p in "$@"; do
  timeout 150 python3 bench/reference_bench.py --device cuda --only kernelbench --correct 100 --bugs 100 \
    --store /tmp/kb-store --out $R/kb-$p.md --json $R/kb-$p.json ${p}_ > $R/kb-$p.log 2>&1
done; }
kb 12 14 16 18 20 22 &
kb 13 15 17 19 21 &
( for extra in "" "--supports all"; do
    echo "== softmax_warps_per_row $extra"
    timeout 120 $G fuzz examples/kernels/limits.py:softmax_warps_per_row --op softmax -n 100 --seed 1 --device cuda \
      --store /tmp/lim-store $extra
    echo "exit $?"
  done > $R/limits.log 2>&1 ) &
wait
echo "phase 1: ${SECONDS} s" > $R/phase.txt
find $R -name '*.safetensors' -size +2M -delete
tar czf $OUT/d3.tgz -C /tmp resd3
SECONDS=0
timeout ${T2:-170} python3 bench/hook_real_model.py --large --steps 40 --evals 40 --skip-alone \
  --out $R/hook_large.md --json $R/hook_large.json > $R/hook_large.log 2>&1
echo "phase 2: ${SECONDS} s (exit $?)" >> $R/phase.txt
tar czf $OUT/d3h.tgz -C /tmp resd3/hook_large.md resd3/hook_large.json resd3/hook_large.log resd3/phase.txt
