#!/usr/bin/env bash
# H200 session, call A (bench/h200/README.md): the corpus cold on 16 cores, then the reference-judged corpora,
# the overflow pairs and the CUDA rule-pack fits at once. Everything lands in $OUT/a.tgz.
set -u
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tc XLA_PYTHON_CLIENT_PREALLOCATE=false
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
R=/tmp/res; mkdir -p $R; rm -rf $TRITON_CACHE_DIR
G="python3 -m gpuemu"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)' >> $R/gpu.txt
# 1. the corpus, cold Triton cache, warmed on every core (the 120 s target)
/usr/bin/time -f "%e s wall" -o $R/corpus.time timeout 330 $G check --manifest examples/kernels/manifest.yaml \
  --device cuda -n 100 --seed 1 -j 16 --store $R/corpus-store --json $R/corpus.json > $R/corpus.log 2>&1
# 2. at once: families, KernelBench, the CUDA C++ pair, the overflow pairs, the attention/matmul fits
timeout 300 $G check --manifest examples/families/manifest.yaml --device cuda -n 100 --seed 1 -j 8 \
  --store $R/fam-store --json $R/families.json > $R/families.log 2>&1 &
timeout 300 $G check --manifest examples/kernelbench/check.yaml --device cuda -n 60 --seed 1 -j 8 \
  --store $R/kb-store --json $R/kb.json > $R/kb.log 2>&1 &
timeout 300 $G check --manifest examples/cuda_cpp/check.yaml --device cuda -n 100 --seed 1 -j 2 \
  --store $R/cpp-store --json $R/cpp.json > $R/cpp.log 2>&1 &
timeout 300 python3 bench/overflow_h200.py --timeout 280 --out $R/overflow_h200.md --json $R/overflow_h200.json > $R/overflow.log 2>&1 &
for op in attention matmul; do
  timeout 300 $G calibrate --op $op --corpus examples/kernels/manifest.yaml --samples 60 --device cuda \
    --out $R/cal-$op.yaml > $R/cal-$op.log 2>&1 &
done
wait
tar czf $OUT/a.tgz -C /tmp res
