#!/usr/bin/env bash
# H200, call 1 of session D (bench/h200/README.md). First, alone and cold (empty Triton cache): the whole corpus and
# its controls, `gpuemu check --device cuda -n 100 -j 16` (issue 37: LIMIT lines, 0 failures on correct kernels,
# every bug caught, wall time). Then the 8 kernel families against their references with --device cuda, one
# process each (issue 35: buggy twins 100 iterations, correct twins 300 per dtype); each run is appended to
# fam-*.json.partial.jsonl as it ends, so a family cut short by its timeout still shows what finished.
# Results: $OUT/d1.tgz (small files only).
set -u
export TRITON_CACHE_DIR=/tmp/tc-d1
rm -rf /tmp/tc-d1
source bench/h200/common.sh /tmp/resd
SECONDS=0
timeout ${TC:-200} $G check --manifest examples/kernels/manifest.yaml --device cuda -n 100 --seed 1 -j 16 \
  --store /tmp/corpus-store --json $R/corpus.json --markdown $R/corpus.md > $R/corpus.log 2>&1
echo "corpus: exit $? in ${SECONDS} s (cold cache, -j 16)" > $R/phase.txt
SECONDS=0
for f in int8_gemm fp8_gemm moe_gemm gqa_attention paged_decode add_rmsnorm rope_pos masked_softmax; do
  timeout ${TF:-330} python3 bench/reference_bench.py --device cuda --only families --correct 300 --bugs 100 \
    --store /tmp/fam-store-$f --out $R/fam-$f.md --json $R/fam-$f.json $f > $R/fam-$f.log 2>&1 &
done
wait
echo "families: ${SECONDS} s" >> $R/phase.txt
tar czf $OUT/d1.tgz -C /tmp resd
