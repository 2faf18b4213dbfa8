"""The portable random stream behind every case: xorshift128+ seeded by splitmix64.

Exact specification (so that another language can reproduce the bytes):

* ``splitmix64(x)``: ``x += 0x9E3779B97F4A7C15; z = x; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9;
  z = (z ^ z>>27) * 0x94D049BB133111EB; return z ^ z>>31`` (all mod 2**64).
* ``xorshift128+`` (Vigna, shifts 23/17/26): ``s1 = s[0]; s0 = s[1]; out = s0 + s1; s[0] = s0;
  s1 ^= s1 << 23; s[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26)``.
* A ``Rng(seed)`` starts with ``s[0], s[1]`` = the first two outputs of a splitmix64 sequence whose
  state starts at ``seed``. It drives every scalar decision of a case (shape, layout, distribution).
* A tensor of ``n`` values takes one ``block_seed = rng.next_u64()`` and draws from ``LANES`` = 4096
  independent xorshift128+ lanes: lane ``i`` starts with ``s[0], s[1]`` = outputs ``2i`` and
  ``2i+1`` of the splitmix64 sequence started at ``block_seed``. Value ``j`` is the ``j // LANES``-th
  output of lane ``j % LANES``. Only the lanes that are needed are computed; the layout is fixed.
* Floats use only IEEE-exact operations: ``u = (x >> 11) * 2**-53`` (uniform in [0, 1)); normal
  values use Acklam's inverse normal CDF on ``p = ((x >> 11) + 0.5) * 2**-53``, with the logarithm in
  its tails computed by ``_exact_log`` below (frexp and an odd series, no libm). A float64 value becomes
  a narrower dtype by round-to-nearest-even casts float64 -> float32 -> dtype.

Test vectors live in ``tests/data/rng_vectors.json``.
"""

from __future__ import annotations

import numpy as np

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
LANES = 4096

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_U = np.uint64


def splitmix64(state: int) -> tuple[int, int]:
    """Advance a splitmix64 state once: returns (new_state, output)."""
    state = (state + GOLDEN) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def derive_seed(seed: int, index: int) -> int:
    """The seed of the ``index``-th case of a run seeded with ``seed`` (splitmix64 at position index)."""
    _, out = splitmix64((seed + index * GOLDEN) & MASK64)
    return out


class Rng:
    """Scalar xorshift128+ stream for a case's decisions.

    >>> r = Rng(0); r.next_u64() == Rng(0).next_u64()
    True
    """

    __slots__ = ("s0", "s1")

    def __init__(self, seed: int) -> None:
        st, a = splitmix64(seed & MASK64)
        _, b = splitmix64(st)
        self.s0, self.s1 = a, b

    def next_u64(self) -> int:
        s1, s0 = self.s0, self.s1
        out = (s0 + s1) & MASK64
        self.s0 = s0
        s1 = (s1 ^ (s1 << 23)) & MASK64
        self.s1 = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26)
        return out

    def below(self, n: int) -> int:
        """Uniform integer in [0, n) by the multiply-high method (exact, no modulo bias worth noting)."""
        if n <= 0:
            raise ValueError("below() needs n > 0")
        return (self.next_u64() * n) >> 64

    def between(self, lo: int, hi: int) -> int:
        """Uniform integer in [lo, hi]."""
        return lo + self.below(hi - lo + 1)

    def uniform(self) -> float:
        return (self.next_u64() >> 11) * (1.0 / (1 << 53))

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def weighted(self, weights: dict):
        """Pick a key of ``weights`` (integer weights, in insertion order)."""
        total = sum(weights.values())
        k = self.below(total)
        for key, w in weights.items():
            if k < w:
                return key
            k -= w
        raise AssertionError("unreachable")


def _splitmix_vector(seed: int, count: int) -> np.ndarray:
    """Outputs 0..count-1 of the splitmix64 sequence started at ``seed``."""
    idx = np.arange(1, count + 1, dtype=np.uint64)
    z = _U(seed & MASK64) + idx * _U(GOLDEN)
    z = (z ^ (z >> _U(30))) * _M1
    z = (z ^ (z >> _U(27))) * _M2
    return z ^ (z >> _U(31))


def raw_u64(block_seed: int, n: int) -> np.ndarray:
    """``n`` uint64 values from the lane layout described in the module docstring."""
    lanes = min(LANES, max(n, 1))
    init = _splitmix_vector(block_seed, 2 * lanes)
    s0 = init[0::2].copy()
    s1 = init[1::2].copy()
    steps = -(-n // lanes)
    out = np.empty((steps, lanes), dtype=np.uint64)
    c23, c17, c26 = _U(23), _U(17), _U(26)
    with np.errstate(over="ignore"):
        for step in range(steps):
            a, b = s0, s1  # a = s[0] (called s1 in Vigna's code), b = s[1]
            np.add(b, a, out=out[step])
            a = a ^ (a << c23)
            s0, s1 = b, a ^ b ^ (a >> c17) ^ (b >> c26)
    return out.reshape(-1)[:n]


def uniform01(block_seed: int, n: int) -> np.ndarray:
    """``n`` float64 values uniform in [0, 1)."""
    return (raw_u64(block_seed, n) >> _U(11)).astype(np.float64) * (1.0 / (1 << 53))


_LN2 = 0.6931471805599453
_SQRT_HALF = 0.7071067811865476


def _exact_log(x: np.ndarray) -> np.ndarray:
    """Natural log of positive finite x with frexp and an odd series: IEEE-exact operations only."""
    m, e = np.frexp(x)
    small = m < _SQRT_HALF
    m = np.where(small, m * 2.0, m)
    e = np.where(small, e - 1, e).astype(np.float64)
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    acc = np.zeros_like(s)
    for k in range(21, 0, -2):  # Horner on 1/k coefficients of 2*atanh(s)
        acc = acc * s2 + (1.0 / k)
    return e * _LN2 + 2.0 * s * acc


_A = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
      -3.066479806614716e01, 2.506628277459239e00)
_B = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
      -1.328068155288572e01)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549671010422282e00,
      4.374664141464968e00, 2.938163982698783e00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
_P_LOW = 0.02425


def _poly(coefs, x):
    acc = np.full_like(x, coefs[0])
    for c in coefs[1:]:
        np.multiply(acc, x, out=acc)
        np.add(acc, c, out=acc)
    return acc


def normal(block_seed: int, n: int) -> np.ndarray:
    """``n`` float64 standard-normal values (Acklam's inverse CDF, exact operations only)."""
    p = ((raw_u64(block_seed, n) >> _U(11)).astype(np.float64) + 0.5) * (1.0 / (1 << 53))
    q = p - 0.5
    r = q * q
    den = _poly(_B, r)
    np.multiply(den, r, out=den)
    np.add(den, 1.0, out=den)
    out = _poly(_A, r)
    np.multiply(out, q, out=out)
    np.divide(out, den, out=out)
    tail = np.abs(q) > (0.5 - _P_LOW)
    if tail.any():
        pt = p[tail]
        lo = pt < 0.5
        t = np.sqrt(-2.0 * _exact_log(np.where(lo, pt, 1.0 - pt)))
        v = _poly(_C, t) / (_poly(_D, t) * t + 1.0)
        out[tail] = np.where(lo, v, -v)
    return out
