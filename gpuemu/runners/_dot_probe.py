"""A one-dot kernel that asks for input_precision="ieee": compiled once by :mod:`gpuemu.runners.dots` to see
how the installed Triton prints an fp32 dot's default precision. Imported only when that is needed."""

import triton
import triton.language as tl


@triton.jit
def gpuemu_dot_probe(a_ptr, c_ptr):
    o = tl.arange(0, 16)
    a = tl.load(a_ptr + o[:, None] * 16 + o[None, :])
    tl.store(c_ptr + o[:, None] * 16 + o[None, :], tl.dot(a, a, input_precision="ieee"))
