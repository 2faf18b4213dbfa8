#!/usr/bin/env bash
# GPU session J (bench/gpu_session_j.md), one call: (1) alone, on an empty Triton cache, the corpus and its controls,
# `gpuemu check --device cuda -n 100 -j 16`, with check's warm-up whose compile jobs now call the launcher on the
# cases that made their keys only (issue 37: <= 120 s); (2) with the time left, the 8 kernel families with
# --device cuda, 300 cases per dtype of each correct twin and 100 of each buggy one, with the FMA allowance of
# reference-judged CUDA cases and GQA's declared D <= 256 (gqa_attention over four processes as in session F).
# HOOK=1 runs the hook at large size with its skipped-graph dump after the corpus. Results in /tmp/resj, packed into $OUT/j.tgz
# after each phase. CORPUS=0 skips phase 1, FAMILIES=0 stops after it (two calls when one call's 600 s is short).
set -u
export TRITON_CACHE_DIR=/tmp/tc-j
rm -rf /tmp/tc-j
source bench/h200/common.sh /tmp/resj
pack() { find $R -name '*.safetensors' -size +1M -delete; tar czf $OUT/j.tgz -C /tmp resj; }
ALL=0
if [ "${CORPUS:-1}" = 1 ]; then
SECONDS=0
timeout ${T1:-170} $G check --manifest examples/kernels/manifest.yaml --device cuda -n 100 --seed 1 -j 16 \
  --store /tmp/corpus-store-j --json $R/corpus.json --markdown $R/corpus.md > $R/corpus.log 2>&1
echo "phase 1 (corpus cold, -j 16): exit $? in ${SECONDS} s" >> $R/phase.txt; ALL=$((ALL+SECONDS)); pack
fi
if [ "${HOOK:-0}" = 1 ]; then
  SECONDS=0
  timeout ${T0:-140} python3 bench/hook_real_model.py --large --steps 40 --evals 40 --skip-alone \
    --dump-skipped $R/skipped --out $R/hook_large.md --json $R/hook_large.json > $R/hook_large.log 2>&1
  echo "hook large: exit $? in ${SECONDS} s" >> $R/phase.txt; ALL=$((ALL+SECONDS)); pack
fi
[ "${FAMILIES:-1}" = 1 ] || { cat $R/phase.txt; tail -4 $R/corpus.log | cut -c1-300; exit 0; }
SECONDS=0
T=$(( ${BUDGET:-560} - ALL )); [ $T -lt 120 ] && T=120
families $T
(while sleep 45; do pack; done) & PACKER=$!  # the partial results come back if the device time runs out
wait $(jobs -p | grep -v "^$PACKER$")
kill $PACKER 2>/dev/null
echo "phase 2 (families, limit $T s): ${SECONDS} s" >> $R/phase.txt; pack
cat $R/phase.txt; tail -4 $R/corpus.log | cut -c1-300
python3 -c "import json;d=json.load(open('$R/corpus.json'));print('warmed',json.dumps(d.get('warmed'))[:600])" 2>&1 | tail -1
for f in $R/fam-*.md; do echo "== $f"; grep -E "^\|" $f | tail -n +3 | cut -c1-260; done
