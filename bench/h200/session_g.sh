#!/usr/bin/env bash
# GPU session F, call 2 (bench/h200/README.md): first, alone and cold (empty Triton cache), the whole corpus and its
# controls, `gpuemu check --device cuda -n 100 -j 16`, with check's warm-up compiling each specialisation once
# (issue 37: <= 120 s, LIMIT lines, 0 failures on correct kernels, every bug caught). Then, with that cache, the CUDA
# pack's attention rows (one process per dtype: attention's controls are compile-bound) and matmul rows fitted.
# Results: $OUT/g1.tgz (small files only).
set -u
export TRITON_CACHE_DIR=/tmp/tc-g
rm -rf /tmp/tc-g
source bench/h200/common.sh /tmp/resg
SECONDS=0
timeout ${TC:-200} $G check --manifest examples/kernels/manifest.yaml --device cuda -n 100 --seed 1 -j 16 \
  --store /tmp/corpus-store --json $R/corpus.json --markdown $R/corpus.md > $R/corpus.log 2>&1
echo "corpus: exit $? in ${SECONDS} s (cold cache, -j 16)" > $R/phase.txt
tar czf $OUT/g0.tgz -C /tmp resg
SECONDS=0
T=${T2:-330}
for dt in fp32 fp16 bf16; do
  (timeout $T $G calibrate --op attention --corpus examples/kernels/manifest.yaml --samples 60 --device cuda --dtype $dt \
    --out $R/fit-attention-$dt.yaml > $R/fit-attention-$dt.log 2>&1; echo "attention $dt: exit $? at ${SECONDS} s" >> $R/phase.txt) &
done
(timeout $T $G calibrate --op matmul --corpus examples/kernels/manifest.yaml --samples 60 --device cuda \
  --out $R/fit-matmul.yaml > $R/fit-matmul.log 2>&1; echo "matmul: exit $? at ${SECONDS} s" >> $R/phase.txt) &
wait
echo "phase 2: ${SECONDS} s" >> $R/phase.txt
tar czf $OUT/g1.tgz -C /tmp resg
cat $R/phase.txt; tail -5 $R/corpus.log
