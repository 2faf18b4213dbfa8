"""RMSNorm in CUDA C++ (torch.utils.cpp_extension.load_inline), one block of 256 threads per row, fp32 inside,
for fp32/fp16/bf16. ModelNew is correct; ModelNewVec4 is the LLM-style "vectorised" rewrite with a planted bug:
it walks each row in float4-sized steps of 4 elements and forgets the remainder, so rows whose length is not a
multiple of 4 leave their last 1-3 outputs unwritten (and their squares out of the mean). The example call's
rows (4096) are a multiple of 4: allclose on get_inputs() passes. The extension builds on first use (nvcc; a
CUDA GPU): `gpuemu fuzz examples/cuda_cpp/solution.py:ModelNew --reference examples/cuda_cpp/problem.py:Model
--device cuda`."""
import torch
import torch.nn as nn

_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

template <typename T, int STEP>
__global__ void rmsnorm_kernel(const T* __restrict__ x, const float* __restrict__ w, T* __restrict__ y,
                               int64_t n, int64_t stride_row, float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * stride_row;
  T* yr = y + row * n;
  // STEP 1: every element; STEP 4: the "vectorised" walk, which stops at the last whole group of four
  const int64_t end = STEP == 1 ? n : (n / 4) * 4;
  float acc = 0.f;
  for (int64_t i = threadIdx.x; i < end; i += blockDim.x) {
    float v = static_cast<float>(xr[i]);
    acc += v * v;
  }
  __shared__ float part[256];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = rsqrtf(part[0] / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < end; i += blockDim.x) {
    yr[i] = static_cast<T>(static_cast<float>(xr[i]) * inv * w[i]);
  }
}

torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps, int64_t step) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda(), "rmsnorm: CUDA tensors only");
  TORCH_CHECK(x.stride(-1) == 1 && w.is_contiguous(), "rmsnorm: the last dim must be contiguous");
  TORCH_CHECK(w.scalar_type() == at::kFloat, "rmsnorm: fp32 weight");
  const int64_t n = x.size(-1);
  auto x2 = x.reshape({-1, n});
  auto y = torch::empty({x2.size(0), n}, x.options());
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(), "rmsnorm", [&] {
    if (x2.size(0) == 0) return;
    if (step == 4) {
      rmsnorm_kernel<scalar_t, 4><<<x2.size(0), 256, 0, stream>>>(x2.data_ptr<scalar_t>(), w.data_ptr<float>(),
          y.data_ptr<scalar_t>(), n, x2.stride(0), static_cast<float>(eps));
    } else {
      rmsnorm_kernel<scalar_t, 1><<<x2.size(0), 256, 0, stream>>>(x2.data_ptr<scalar_t>(), w.data_ptr<float>(),
          y.data_ptr<scalar_t>(), n, x2.stride(0), static_cast<float>(eps));
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y.view(x.sizes());
}
"""

_ext = None


def _extension():
    global _ext
    if _ext is None:
        from torch.utils.cpp_extension import load_inline

        _ext = load_inline(name="gpuemu_example_rmsnorm", cpp_sources="torch::Tensor rmsnorm(torch::Tensor x, "
                           "torch::Tensor w, double eps, int64_t step);", cuda_sources=_SRC, functions=["rmsnorm"],
                           extra_cuda_cflags=["-O3"], verbose=False)
    return _ext


class ModelNew(nn.Module):
    STEP = 1

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight.float().contiguous()
        return _extension().rmsnorm(x, w, float(self.eps), self.STEP)


class ModelNewVec4(ModelNew):
    STEP = 4  # BUG: the remainder of a row past its last group of four is never summed nor written
