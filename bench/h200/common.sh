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
