#!/usr/bin/env bash
# GPU session J (bench/gpu_session_j.md), one call: (1) the hook at large size, dumping the graph still without a
# plan (session I's dump did not come back); (2) the 8 kernel families with --device cuda, 300 cases per dtype of
# each correct twin and 100 of each buggy one, with the FMA allowance of reference-judged CUDA cases and GQA's
# declared D <= 256 (gqa_attention split over four processes as in session F: its buggy twin and one per dtype).
# Results in /tmp/resj, packed into $OUT/j.tgz after each phase.
set -u
export TRITON_CACHE_DIR=/tmp/tc-j
source bench/h200/common.sh /tmp/resj
pack() { find $R -name '*.safetensors' -size +1M -delete; tar czf $OUT/j.tgz -C /tmp resj; }
SECONDS=0
timeout ${T1:-140} python3 bench/hook_real_model.py --large --steps 40 --evals 40 --skip-alone \
  --dump-skipped $R/skipped --out $R/hook_large.md --json $R/hook_large.json > $R/hook_large.log 2>&1
echo "phase 1 (hook large): exit $? in ${SECONDS} s" > $R/phase.txt; pack
SECONDS=0
T=${T2:-380}
fam() {  # NAME TAG [reference_bench arguments]
  local name=$1 tag=$2; shift 2
  timeout $T python3 bench/reference_bench.py --device cuda --only families --correct 300 --bugs 100 \
    --store $R/store-$tag --out $R/fam-$tag.md --json $R/fam-$tag.json "$@" $name > $R/fam-$tag.log 2>&1
  echo "fam $tag: exit $? at ${SECONDS} s" >> $R/phase.txt
}
for f in int8_gemm fp8_gemm moe_gemm paged_decode add_rmsnorm rope_pos masked_softmax; do fam $f $f & done
fam gqa_attention gqa-buggy --twins buggy &
for dt in fp32 fp16 bf16; do fam gqa_attention gqa-$dt --twins correct --dtypes $dt & done
wait
echo "phase 2 (families): ${SECONDS} s" >> $R/phase.txt; pack
cat $R/phase.txt; grep -E "^\| gpt2" $R/hook_large.md | cut -c1-300; ls $R/skipped 2>/dev/null | head
for f in $R/fam-*.md; do echo "== $f"; grep -E "^\|" $f | tail -n +3 | cut -c1-260; done
