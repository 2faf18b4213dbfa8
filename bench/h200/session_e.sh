#!/usr/bin/env bash
# Prepared for the next GPU session, NOT RUN YET (bench/h200/README.md). What session D left open, in one call:
# phase 1, alone: the hook at large size after the scratch rule's and the row analysis's changes (issue 36);
# phase 2, at once: the CUDA pack's attention and matmul rows fitted (issue 37), the GQA family's correct twin and the
# three correct twins that failed an fp32 case on the H100 (fp8_gemm, paged_decode, KernelBench 16) under the
# reference judge's undetermined rule (issue 35).
# Results: $OUT/e1.tgz after phase 1, $OUT/e2.tgz after phase 2 (small files only).
set -u
export TRITON_CACHE_DIR=/tmp/tc-e
source bench/h200/common.sh /tmp/rese
SECONDS=0
timeout ${T1:-150} python3 bench/hook_real_model.py --large --steps 40 --evals 40 --skip-alone \
  --out $R/hook_large.md --json $R/hook_large.json > $R/hook_large.log 2>&1
echo "phase 1: ${SECONDS} s (exit $?)" > $R/phase.txt
tar czf $OUT/e1.tgz -C /tmp rese
SECONDS=0
T=${T2:-400}
for op in attention matmul; do
  timeout $T $G calibrate --op $op --corpus examples/kernels/manifest.yaml --samples 60 --device cuda \
    --out $R/fit-$op.yaml > $R/fit-$op.log 2>&1 &
done
for f in gqa_attention fp8_gemm paged_decode; do
  timeout $T python3 bench/reference_bench.py --device cuda --only families --correct 300 --bugs 100 \
    --store $R/fam-store-$f --out $R/fam-$f.md --json $R/fam-$f.json $f > $R/fam-$f.log 2>&1 &
done
timeout $T python3 bench/reference_bench.py --device cuda --only kernelbench --correct 100 --bugs 100 \
  --store $R/kb-store --out $R/kb-16.md --json $R/kb-16.json 16_ > $R/kb-16.log 2>&1 &
wait
echo "phase 2: ${SECONDS} s" >> $R/phase.txt
find $R -name '*.safetensors' -size +2M -delete
tar czf $OUT/e2.tgz -C /tmp rese
