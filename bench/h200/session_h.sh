#!/usr/bin/env bash
# GPU session F, call 3 (bench/gpu_session_f.md): the cold corpus without check's warm-up (--no-warm), to compare with
# call 2's run with it (past 200 s); then the paged_decode case that failed on CUDA and passed on the CPU, replayed
# on CUDA. Results: $OUT/h1.tgz.
set -u
export TRITON_CACHE_DIR=/tmp/tc-h
rm -rf /tmp/tc-h
source bench/h200/common.sh /tmp/resh
SECONDS=0
timeout ${TC:-240} $G check --manifest examples/kernels/manifest.yaml --device cuda -n 100 --seed 1 -j 16 --no-warm \
  --store /tmp/corpus-store-h --json $R/corpus-nowarm.json --markdown $R/corpus-nowarm.md > $R/corpus-nowarm.log 2>&1
echo "corpus --no-warm: exit $? in ${SECONDS} s (cold cache, -j 16)" > $R/phase.txt
SECONDS=0
timeout 60 $G reproduce 0xbf00dfcca104b8b7 --store bench/h200/results_f/resf/store-paged_decode --device cuda \
  > $R/paged-replay.log 2>&1
echo "paged_decode replay on cuda: exit $? in ${SECONDS} s" >> $R/phase.txt
tar czf $OUT/h1.tgz -C /tmp resh
cat $R/phase.txt; tail -4 $R/corpus-nowarm.log; tail -6 $R/paged-replay.log
