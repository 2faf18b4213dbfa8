#!/usr/bin/env bash
# GPU session I (bench/gpu_session_i.md), one call: (1) the hook at large size with the sampled-rows promotion of
# whole values that hold rows (row_local), dumping any graph still without a plan; (2) the paged_decode / GQA cases
# that failed on CUDA with non-contiguous inputs only, rebuilt with their exact layouts and run in variants
# (bench/h200/diag_strided.py, PTX of paged_decode kept); (3) the paged_decode record replayed on CUDA.
# Results in /tmp/resi, packed into $OUT/i.tgz after each phase (the return limit counts files: of 13 loose files,
# 8 came back in the session's one call).
set -u
export TRITON_CACHE_DIR=/tmp/tc-i
source bench/h200/common.sh /tmp/resi
pack() { tar czf $OUT/i.tgz -C /tmp resi; }
SECONDS=0
timeout ${T1:-150} python3 bench/hook_real_model.py --large --steps 40 --evals 40 --skip-alone \
  --dump-skipped $R/skipped --out $R/hook_large.md --json $R/hook_large.json > $R/hook_large.log 2>&1
echo "phase 1 (hook large): exit $? in ${SECONDS} s" > $R/phase.txt; pack
SECONDS=0
timeout ${T2:-120} python3 bench/h200/diag_strided.py --device cuda --out $R/ptx > $R/diag.log 2>&1
echo "phase 2 (diag): exit $? in ${SECONDS} s" >> $R/phase.txt; pack
SECONDS=0
timeout 60 $G reproduce 0xbf00dfcca104b8b7 --store bench/h200/results_f/resf/store-paged_decode --device cuda \
  > $R/paged-replay.log 2>&1
echo "phase 3 (paged_decode replay on cuda): exit $? in ${SECONDS} s" >> $R/phase.txt; pack
cat $R/phase.txt; grep -E "^\| gpt2" $R/hook_large.md | cut -c1-400; cat $R/diag.log | cut -c1-220; tail -4 $R/paged-replay.log
