#!/usr/bin/env bash
# H200 session, call B (bench/h200/README.md): the families' correct twins at 300 cases per dtype, the narrowing
# softmax, CPU-found failures replayed on the GPU, GPT-2 with the hook at large sizes. Lands in $OUT/b.tgz.
set -u
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
R=/tmp/resb; mkdir -p $R
G="python3 -m gpuemu"
timeout 420 $G check --manifest examples/families/manifest.yaml --select correct=true --device cuda -n 900 --seed 2 \
  -j 8 --store $R/fam300-store --json $R/families300.json > $R/families300.log 2>&1 &
timeout 420 python3 bench/hook_real_model.py --large --out $R/hook_large_h200.md --json $R/hook_large_h200.json \
  > $R/hook_large.log 2>&1 &
( for s in 1 2 3; do
    timeout 120 $G fuzz examples/kernels/precision.py:softmax_fp16_narrow --op softmax -n 100 --seed $s --device cuda \
      --store $R/narrow-store --json $R/narrow-$s.json
  done > $R/narrow.log 2>&1
  S=bench/out/h200/cpu-found
  python3 - "$S" <<'PY' > $R/replays.txt
import json, sys
d = json.load(open(sys.argv[1] + ".json"))
for k in d["kernels"]:
    if k["failures"]:
        f = k["failures"][0]
        print(f["case"]["seed"], k["target"])
PY
  i=0
  while read -r seed target; do
    i=$((i+1)); rel=${target#*examples/}
    timeout 120 $G reproduce $(printf '0x%x' $seed) --store $S --target examples/$rel --device cuda \
      --json $R/rep-$i.json >> $R/replays.log 2>&1; echo "exit $?" >> $R/replays.log
  done < $R/replays.txt ) &
wait
tar czf $OUT/b.tgz -C /tmp resb
