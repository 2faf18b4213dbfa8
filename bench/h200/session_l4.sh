#!/usr/bin/env bash
# GPU session L, fourth call (bench/gpu_session_l.md): (1) alone, the corpus cold with -j 16 again (issue 37 asks
# <= 120 s on the H200; the first call got an H100); (2) the GQA family's correct twin in fp32, 300 cases, alone with
# a compile-ahead pool of 14 workers (the third call's run, one process among eleven without a pool, reached case
# 150 in 400 s: compile-bound). Results: $OUT/l4.tgz.
set -u
export TRITON_CACHE_DIR=/tmp/tc-l4
rm -rf /tmp/tc-l4
source bench/h200/common.sh /tmp/resl4
pack() { find $R -name '*.safetensors' -size +1M -delete; tar czf $OUT/l4.tgz -C /tmp resl4; }
SECONDS=0
timeout ${T1:-170} $G check --manifest examples/kernels/manifest.yaml --device cuda -n 100 --seed 1 -j 16 \
  --store /tmp/corpus-store-l4 --markdown $R/corpus.md > $R/corpus.log 2>&1
echo "corpus cold, -j 16: exit $? in ${SECONDS} s" >> $R/phase.txt; pack
SECONDS=0
timeout ${T2:-200} python3 bench/reference_bench.py --device cuda --only families --correct 300 --twins correct \
  --dtypes fp32 --compile-workers 14 --store $R/store-gqa-fp32 --out $R/fam-gqa-fp32.md --json $R/fam-gqa-fp32.json \
  gqa_attention > $R/fam-gqa-fp32.log 2>&1
echo "gqa fp32 (pool of 14): exit $? in ${SECONDS} s" >> $R/phase.txt; pack
cat $R/phase.txt; head -3 $R/corpus.md | cut -c1-200; tail -3 $R/fam-gqa-fp32.log | cut -c1-200
grep -E "^\|" $R/fam-gqa-fp32.md | tail -n +3 | cut -c1-200
