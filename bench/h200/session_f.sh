#!/usr/bin/env bash
# GPU session F, call 1 (bench/h200/README.md): the hook at large size alone (issue 36), then at once the 8 kernel
# families against their references with --device cuda, 300 cases per dtype of each correct twin and 100 of each
# buggy one (issue 35's "one call"; gqa_attention, compile-bound, split over four processes: its buggy twin and one
# per dtype of its correct twin, the same seeds as one process), and KernelBench 16 (the undetermined rule).
# Results: $OUT/f1.tgz (small files only).
set -u
export TRITON_CACHE_DIR=/tmp/tc-f
source bench/h200/common.sh /tmp/resf
SECONDS=0
timeout ${T1:-120} python3 bench/hook_real_model.py --large --steps 40 --evals 40 --skip-alone \
  --out $R/hook_large.md --json $R/hook_large.json > $R/hook_large.log 2>&1
echo "phase 1 (hook): ${SECONDS} s (exit $?)" > $R/phase.txt
tar czf $OUT/f0.tgz -C /tmp resf
SECONDS=0
T=${T2:-400}
fam() {  # NAME TAG [reference_bench arguments]
  local name=$1 tag=$2; shift 2
  timeout $T python3 bench/reference_bench.py --device cuda --only families --correct 300 --bugs 100 \
    --store $R/store-$tag --out $R/fam-$tag.md --json $R/fam-$tag.json "$@" $name > $R/fam-$tag.log 2>&1
  echo "fam $tag: exit $? at ${SECONDS} s" >> $R/phase.txt
}
for f in int8_gemm fp8_gemm moe_gemm paged_decode add_rmsnorm rope_pos masked_softmax; do fam $f $f & done
fam gqa_attention gqa-buggy --twins buggy &
for dt in fp32 fp16 bf16; do fam gqa_attention gqa-$dt --twins correct --dtypes $dt & done
(timeout $T python3 bench/reference_bench.py --device cuda --only kernelbench --correct 100 --bugs 100 \
  --store $R/store-kb16 --out $R/kb-16.md --json $R/kb-16.json 16_ > $R/kb-16.log 2>&1;
 echo "kb16: exit $? at ${SECONDS} s" >> $R/phase.txt) &
wait
echo "phase 2: ${SECONDS} s" >> $R/phase.txt
find $R -name '*.safetensors' -size +1M -delete
tar czf $OUT/f1.tgz -C /tmp resf
ls -la $OUT; cat $R/phase.txt
