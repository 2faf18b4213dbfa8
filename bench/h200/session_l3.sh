#!/usr/bin/env bash
# GPU session L, third call (bench/gpu_session_l.md): (1) alone, the hook at large size in pair mode at default
# settings (bench/hook_real_model.py --large: cost, checks by source, divergences), after a graph whose fp64 re-run
# would exceed the scratch is judged as a large call, inputs the compiled call overwrites are copied or not read,
# and the sums over the rows are checked on CUDA again; (2) at once: bench/h200/hook_mem_probe.py (memory per check)
# and the 8 families with --device cuda, --compile-workers 0, until the call's time is spent. Results: $OUT/l3.tgz.
set -u
export TRITON_CACHE_DIR=/tmp/tc-l3
source bench/h200/common.sh /tmp/resl3
pack() { find $R -name '*.safetensors' -size +1M -delete; tar czf $OUT/l3.tgz -C /tmp resl3; }
SECONDS=0
timeout ${T0:-200} python3 bench/hook_real_model.py --large --steps 40 --evals 40 --skip-alone \
  --dump-skipped $R/skipped --out $R/hook_large.md --json $R/hook_large.json > $R/hook_large.log 2>&1
echo "hook large: exit $? in ${SECONDS} s" >> $R/phase.txt; ALL=$SECONDS; pack
SECONDS=0
T=$(( ${BUDGET:-560} - ALL )); [ $T -lt 120 ] && T=120
timeout $((T < 200 ? T : 200)) python3 bench/h200/hook_mem_probe.py --steps 12 > $R/hook_mem.txt 2>&1 &
families $T --compile-workers 0
(while sleep 30; do pack; done) & PACKER=$!
wait $(jobs -p | grep -v "^$PACKER$")
kill $PACKER 2>/dev/null
echo "mem probe and families (limit $T s): ${SECONDS} s" >> $R/phase.txt; pack
cat $R/phase.txt; grep "^| gpt2" $R/hook_large.md | cut -c1-1200; tail -5 $R/hook_large.log | cut -c1-300
grep -v "^  " $R/hook_mem.txt | grep -v Warning | tail -25 | cut -c1-250
for f in $R/fam-*.md; do echo "== $f"; grep -E "^\|" $f | tail -n +3 | cut -c1-200; done
