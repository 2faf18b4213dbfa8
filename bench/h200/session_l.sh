#!/usr/bin/env bash
# GPU session L (bench/gpu_session_l.md), one call: (1) alone, on an empty Triton cache, the corpus and its controls,
# `gpuemu check --device cuda -n 100 -j 16` (issue 37: <= 120 s on the H200); (2) at once: the GQA probe
# (bench/h200/gqa_probe.py: session K's non-deterministic output with a transposed k, in variants) and session K's
# paged_decode fp32 run again with the same seed up to its failing case 150, its store kept (the record is small) to
# be taken apart on the CPU. Results in /tmp/resl, packed into $OUT/l.tgz after each phase.
set -u
export TRITON_CACHE_DIR=/tmp/tc-l
rm -rf /tmp/tc-l
source bench/h200/common.sh /tmp/resl
pack() { find $R -name '*.safetensors' -size +1M -delete; tar czf $OUT/l.tgz -C /tmp resl; }
if [ "${CORPUS:-1}" = 1 ]; then
SECONDS=0
timeout ${T1:-170} $G check --manifest examples/kernels/manifest.yaml --device cuda -n 100 --seed 1 -j 16 \
  --store /tmp/corpus-store-l --json $R/corpus.json --markdown $R/corpus.md > $R/corpus.log 2>&1
echo "phase 1 (corpus cold, -j 16): exit $? in ${SECONDS} s" >> $R/phase.txt; pack
fi
SECONDS=0
timeout ${T2:-150} python3 bench/h200/gqa_probe.py > $R/gqa_probe.txt 2>&1 &
timeout ${T2:-150} python3 bench/reference_bench.py --device cuda --only families --twins correct --dtypes fp32 \
  --correct 150 --compile-workers 0 --store $R/store-paged --out $R/fam-paged.md --json $R/fam-paged.json \
  paged_decode > $R/fam-paged.log 2>&1 &
wait
echo "phase 2 (gqa probe, paged_decode fp32 x150): ${SECONDS} s" >> $R/phase.txt; pack
cat $R/phase.txt; tail -4 $R/corpus.log | cut -c1-300; cat $R/gqa_probe.txt | cut -c1-200; tail -3 $R/fam-paged.log
