#!/usr/bin/env bash
# H200, one call (bench/h200/README.md). Phase 1, all at once: the kernel families (buggy twins 100 iterations,
# correct twins 300 per dtype), the CUDA C++ load_inline pair, the int32/int64 overflow pairs at real size, the
# bf16->fp16 narrowing softmax, 10 CPU-found corpus failures replayed on the GPU, and the corpus' attention
# launchers, refusal control and 3 bugs checked on the GPU (their records come back for the CPU replay).
# Phase 2, alone on a quiet GPU: GPT-2 with its LM head through the hook at batch 64 x 256.
# Results: $OUT/c1.tgz after phase 1, $OUT/c2.tgz after phase 2 (small files only).
set -u
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TRITON_CACHE_DIR=/tmp/tc
mkdir -p /tmp/site
W=.whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  $W/jsonschema-*.whl $W/attrs-*.whl $W/referencing-*.whl $W/jsonschema_specifications-*.whl $W/rpds_py-*.whl || exit 1
# the rest only where the machine lacks it (its torch needs its own typing_extensions, mpmath, ...)
for m in mpmath:mpmath wrapt:wrapt safetensors:safetensors rich:rich opentelemetry.trace:opentelemetry_api yaml:pyyaml; do
  python3 -c "import ${m%%:*}" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --no-compile \
    --target /tmp/site $W/${m#*:}-*.whl
done
export PYTHONPATH=/tmp/site:$PWD
R=/tmp/resc; mkdir -p $R
G="python3 -m gpuemu"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)' >> $R/gpu.txt
T1=${T1:-290}
SECONDS=0
for f in int8_gemm fp8_gemm moe_gemm gqa_attention paged_decode add_rmsnorm rope_pos masked_softmax; do
  timeout $T1 python3 bench/reference_bench.py --device cuda --only families --correct 300 --bugs 100 \
    --store /tmp/fam-store-$f --out $R/fam-$f.md --json $R/fam-$f.json $f > $R/fam-$f.log 2>&1 &
done
timeout $T1 $G check --manifest examples/cuda_cpp/check.yaml --device cuda -n 100 --seed 1 -j 2 \
  --store /tmp/cpp-store --json $R/cpp.json > $R/cpp.log 2>&1 &
timeout $T1 python3 bench/overflow_h200.py --timeout $((T1 - 20)) --out $R/overflow_h200.md \
  --json $R/overflow_h200.json > $R/overflow.log 2>&1 &
timeout $T1 $G check --manifest examples/kernels/manifest.yaml --device cuda -n 100 --seed 1 -j 4 \
  -k 'attention.py:*' -k 'flash_attention.py:*' -k '*softmax_rows_refuses' -k '*cross_entropy_chunked_no_max' \
  -k '*rope_tokens_batch_stride' -k '*add_rows_stride_swap' \
  --store $R/gpu-store --json $R/gpu-corpus.json > $R/gpu-corpus.log 2>&1 &
( for s in 1 2 3; do
    timeout 100 $G fuzz examples/kernels/precision.py:softmax_fp16_narrow --op softmax -n 100 --seed $s \
      --device cuda --store /tmp/narrow-store --json $R/narrow-$s.json
    echo "exit $?"
  done > $R/narrow.log 2>&1 ) &
( S=bench/out/h200/replay-store
  while read -r seed target; do
    echo "== $seed $target"
    timeout 60 $G reproduce $seed --store $S --target $target --device cuda
    echo "exit $?"
  done < bench/out/h200/replays.txt > $R/replays.log 2>&1 ) &
wait
echo "phase 1: ${SECONDS} s" > $R/phase.txt
tar czf $OUT/c1.tgz -C /tmp resc
SECONDS=0
timeout ${T2:-190} python3 bench/hook_real_model.py --large --steps 40 --evals 40 --skip-alone \
  --out $R/hook_large_h200.md --json $R/hook_large_h200.json > $R/hook_large.log 2>&1
echo "phase 2: ${SECONDS} s (exit $?)" >> $R/phase.txt
tar czf $OUT/c2.tgz -C /tmp resc/hook_large_h200.md resc/hook_large_h200.json resc/hook_large.log resc/phase.txt
