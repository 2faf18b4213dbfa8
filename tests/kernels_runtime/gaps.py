"""Small kernels, one per gap between Triton's interpreter and a GPU (written for gpuemu's runtime tests).

Each is correct Triton (it would compile and run right on a GPU) unless its name says ``buggy``; the
plain interpreter runs it wrongly or not at all.
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice as generic_libdevice
from triton.language.extra.cuda import libdevice as cuda_libdevice
from triton.runtime.jit import JITFunction

cast = tl.cast  # an aliased builtin
lmax = tl.maximum


# ------------------------------------------------------------------ bf16
@triton.jit
def bf16_cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)  # fp32
    tl.store(y_ptr + offs, x.to(tl.bfloat16), mask=m)


@triton.jit
def bf16_arith_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)  # bf16
    y = tl.load(y_ptr + offs, mask=m)  # bf16
    z = x * y + x * 2.0  # bf16 arithmetic: each op rounds to bf16 on the GPU
    z = tl.where(z > -x, z, -z)
    tl.store(z_ptr + offs, z, mask=m)


@triton.jit
def bf16_dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.dot(a, b)  # bf16 inputs, fp32 accumulation
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def bf16_rowsum_kernel(x_ptr, y_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + offs).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(x, axis=0).to(tl.bfloat16))


# ------------------------------------------------------------------ memory
@triton.jit
def buggy_tail_load_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # BUG: no mask: the last block reads past the end
    tl.store(y_ptr + offs, x * 2, mask=offs < n)


@triton.jit
def buggy_tail_store_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, x * 2)  # BUG: no mask: the last block writes past the end of y


# ------------------------------------------------------------------ libdevice, assert
@triton.jit
def libdevice_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, cuda_libdevice.tanh(x) + cuda_libdevice.erf(x), mask=m)
    tl.store(z_ptr + offs, generic_libdevice.log1p(tl.abs(x)) + generic_libdevice.rsqrt(x * x + 1.0), mask=m)


@triton.jit
def assert_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    tl.device_assert(x > 0, "log of a non-positive value")
    tl.store(y_ptr + offs, tl.log(x), mask=m)


# ------------------------------------------------------------------ nested helpers decorated without the interpreter
def _scale_raw(x, factor):
    return x * factor


scale_helper = JITFunction(_scale_raw)  # a JITFunction whatever TRITON_INTERPRET says


def _nested_raw(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, scale_helper(x, 3.0) + tl.sum(x, axis=0) * 0, mask=m)


nested_kernel = JITFunction(_nested_raw)


# ------------------------------------------------------------------ autotune and heuristics
@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def buggy_autotuned_rowsum_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    # BUG: one block per row: right only when BLOCK >= n (the 64 config), silently short for 16
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + row, tl.sum(x, axis=0))


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32}),
                          triton.Config({"BLOCK": 64}, num_warps=2)], key=["n"])
@triton.jit
def autotuned_rowsum_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def buggy_accumulating_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    # BUG (on a GPU): accumulates into y, which the launcher zeroes once; the autotuner's benchmark
    # launches add to it again (no reset_to_zero=["y_ptr"])
    tl.atomic_add(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


@triton.heuristics(values={"BLOCK": lambda args: triton.next_power_of_2(args["n"])})
@triton.jit
def heuristic_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=float("-inf"))
    tl.store(y_ptr + offs, x - tl.max(x, axis=0), mask=m)


# ------------------------------------------------------------------ TF32
@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr, IEEE: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r[:, None] * N + r[None, :])
    b = tl.load(b_ptr + r[:, None] * N + r[None, :])
    if IEEE:
        c = tl.dot(a, b, input_precision="ieee")
    else:
        c = tl.dot(a, b)  # fp32 inputs: TF32 on sm_80+ by default
    tl.store(c_ptr + r[:, None] * N + r[None, :], c)


# ------------------------------------------------------------------ real-kernel gaps
@triton.jit
def boolop_kernel(x_ptr, y_ptr, z_ptr, n, lo, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    window = offs >= lo and offs < n  # compiled Triton: a logical and of the two masks
    outside = not (offs < lo) or offs >= n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=window, other=0.0), mask=offs < n)
    tl.store(z_ptr + offs, outside.to(tl.int32), mask=offs < n)


@triton.jit
def float_arg_kernel(x_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float16)
    # eps is an fp32 scalar in compiled Triton: .to works, and x * eps promotes as a scalar does
    y = x * eps.to(tl.float32) + eps
    tl.store(y_ptr + offs, y.to(tl.float32), mask=m)


@triton.jit
def string_constexpr_kernel(x_ptr, y_ptr, n, BLOCK: "tl.constexpr"):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


@triton.jit
def alias_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, lmax(cast(x, tl.float16), 0.0).to(tl.float32), mask=m)


@triton.jit
def _zeros_of(BLOCK: tl.constexpr, DT: tl.constexpr):
    return tl.zeros([BLOCK], dtype=DT.value)  # compiled Triton keeps DT a constexpr in the helper


@triton.jit
def dtype_helper_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, DT: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, (x.to(DT) + _zeros_of(BLOCK, DT)).to(tl.float32), mask=m)


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


@triton.jit
def wait_for_next_program_kernel(flag_ptr, out_ptr):
    pid = tl.program_id(0)
    if pid == 0:
        # program 0 waits until program 1 raised the flag: fine on a GPU, a deadlock when programs run in order
        while tl.atomic_cas(flag_ptr, 1, 1) == 0:
            pass
        tl.store(out_ptr, 1)
    else:
        tl.atomic_xchg(flag_ptr, 1)


@triton.jit
def endless_kernel(x_ptr, n):
    i = tl.load(x_ptr)
    while i < n:  # never changes: a hang on any device
        i = i * 1
    tl.store(x_ptr, i)


# ------------------------------------------------------------------ more runtime checks (not interpreter gaps)
@triton.jit
def bf16_rowmax_kernel(x_ptr, m_ptr, i_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * N + tl.arange(0, N))  # bf16, no upcast
    tl.store(m_ptr + row, tl.max(x, axis=0))
    tl.store(i_ptr + row, tl.argmax(x, axis=0))


@triton.jit
def flag_kernel(x_ptr, y_ptr, n, negate, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if negate:  # a bool argument: an i1 scalar
        x = -x
    tl.store(y_ptr + offs, x, mask=m)


@triton.jit
def block_sum_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    tl.store(y_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0))


@triton.jit
def tiled_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """c = a @ b (contiguous), one BM x BN tile per program of a 2-D grid: the tiles of one row of programs
    interleave in c's memory."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    om = pm * BM + tl.arange(0, BM)
    on = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        ok = k + tl.arange(0, BK)
        x = tl.load(a_ptr + om[:, None] * K + ok[None, :], mask=(om[:, None] < M) & (ok[None, :] < K), other=0.0)
        y = tl.load(b_ptr + ok[:, None] * N + on[None, :], mask=(ok[:, None] < K) & (on[None, :] < N), other=0.0)
        acc += tl.dot(x, y, input_precision="ieee")
    tl.store(c_ptr + om[:, None] * N + on[None, :], acc, mask=(om[:, None] < M) & (on[None, :] < N))
