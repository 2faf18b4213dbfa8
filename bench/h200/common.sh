# Sourced by the session scripts (bench/h200/README.md): `source bench/h200/common.sh RESULTS_DIR`. Installs the
# carried wheels (install.sh), puts them and the checkout on PYTHONPATH, makes RESULTS_DIR ($R) and writes the GPU,
# torch and triton versions to $R/gpu.txt; $G runs gpuemu. TRITON_CACHE_DIR is the script's own choice.
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
bash bench/h200/install.sh || exit 1
export PYTHONPATH=/tmp/site:$PWD
R=$1; mkdir -p "$R"
G="python3 -m gpuemu"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$R/gpu.txt"
python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)' >> "$R/gpu.txt"

# families LIMIT [reference_bench arguments]: the 8 kernel families with --device cuda at once, in the background,
# 300 cases per dtype of each correct twin and 100 of each buggy one, each under `timeout LIMIT`; gqa_attention
# (compile-bound) over four processes, its buggy twin and one per dtype of its correct twin (the same seeds as one
# process). Each run's results go to $R/fam-TAG.{md,json,log} and its exit status to $R/phase.txt; `wait` for them.
families() {
  local t=$1; shift
  fam() {  # NAME TAG [reference_bench arguments]
    local name=$1 tag=$2; shift 2
    timeout $t python3 bench/reference_bench.py --device cuda --only families --correct 300 --bugs 100 \
      --store $R/store-$tag --out $R/fam-$tag.md --json $R/fam-$tag.json "$@" $name > $R/fam-$tag.log 2>&1
    echo "fam $tag: exit $? at ${SECONDS} s" >> $R/phase.txt
  }
  for f in int8_gemm fp8_gemm moe_gemm paged_decode add_rmsnorm rope_pos masked_softmax; do fam $f $f "$@" & done
  fam gqa_attention gqa-buggy --twins buggy "$@" &
  for dt in fp32 fp16 bf16; do fam gqa_attention gqa-$dt --twins correct --dtypes $dt "$@" & done
}
