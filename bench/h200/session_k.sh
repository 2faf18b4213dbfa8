#!/usr/bin/env bash
# GPU session K (bench/gpu_session_k.md), one call: (1) the hook at large size with its skipped-graph dump, after
# the backward graphs' weight gradients became sums over the rows checked in chunks of sequences (issue 36: the one
# graph still skipped on CUDA was GPT-2's whole backward: 3.3 GB of logits' gradient in, only weights' gradients
# out); (2) with the time left, the 8 kernel families with --device cuda as in session J, but each fuzz run without
# its own compile-ahead pool (--compile-workers 0: eleven runs share the 16 cores already; session J's pools of 8
# each left 7 of 8 families unfinished in 377 s). BUDGET: seconds for both. Results: $OUT/k.tgz.
set -u
export TRITON_CACHE_DIR=/tmp/tc-k
source bench/h200/common.sh /tmp/resk
pack() { find $R -name '*.safetensors' -size +1M -delete; tar czf $OUT/k.tgz -C /tmp resk; }
SECONDS=0
timeout ${T0:-130} python3 bench/hook_real_model.py --large --steps 40 --evals 40 --skip-alone \
  --dump-skipped $R/skipped --out $R/hook_large.md --json $R/hook_large.json > $R/hook_large.log 2>&1
echo "hook large: exit $? in ${SECONDS} s" >> $R/phase.txt; ALL=$SECONDS; pack
SECONDS=0
T=$(( ${BUDGET:-450} - ALL - 10 )); [ $T -lt 60 ] && T=60
families $T --compile-workers 0
(while sleep 30; do pack; done) & PACKER=$!  # the partial results come back if the device time runs out
wait $(jobs -p | grep -v "^$PACKER$")
kill $PACKER 2>/dev/null
echo "families (limit $T s): ${SECONDS} s" >> $R/phase.txt; pack
cat $R/phase.txt; grep "^| gpt2" $R/hook_large.md | cut -c1-900
for f in $R/fam-*.md; do echo "== $f"; grep -E "^\|" $f | tail -n +3 | cut -c1-200; done
