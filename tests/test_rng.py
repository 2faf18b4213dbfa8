import json
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuemu import rng

VECTORS = json.loads((Path(__file__).parent / "data" / "rng_vectors.json").read_text())
M = (1 << 64) - 1


def _ref_splitmix(state):
    state = (state + 0x9E3779B97F4A7C15) & M
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return state, z ^ (z >> 31)


def _ref_lane(block_seed, lane, steps):
    """Vigna's xorshift128+ in plain Python, seeded as the docstring of gpuemu.rng says."""
    st_ = block_seed
    outs = []
    for _ in range(2 * lane + 2):
        st_, o = _ref_splitmix(st_)
        outs.append(o)
    s = [outs[2 * lane], outs[2 * lane + 1]]
    res = []
    for _ in range(steps):
        s1, s0 = s[0], s[1]
        res.append((s0 + s1) & M)
        s[0] = s0
        s1 = (s1 ^ (s1 << 23)) & M
        s[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26)
    return res


def test_splitmix64_matches_the_published_sequence():
    # SplittableRandom/splitmix64 reference outputs for seed 1234567
    s, out = 1234567, []
    for _ in range(5):
        s, o = rng.splitmix64(s)
        out.append(str(o))
    assert out == VECTORS["splitmix64_1234567"]


def test_committed_vectors():
    r = rng.Rng(0)
    assert [str(r.next_u64()) for _ in range(8)] == VECTORS["xorshift128p_seed0"]
    raw = rng.raw_u64(42, rng.LANES * 2 + 4)
    assert [str(int(v)) for v in raw[:4]] == VECTORS["raw_u64_block42_head"]
    assert [str(int(v)) for v in raw[rng.LANES:rng.LANES + 4]] == VECTORS["raw_u64_block42_lane0_step1"]
    assert [float(v).hex() for v in rng.uniform01(7, 6)] == VECTORS["uniform01_block7"]
    assert [float(v).hex() for v in rng.normal(7, 6)] == VECTORS["normal_block7"]
    assert [float(v).hex() for v in rng.normal(7, 50000)[::5000]] == VECTORS["normal_tail_block7"]
    assert [str(rng.derive_seed(99, i)) for i in range(4)] == VECTORS["derive_seed_99"]


def test_case_bytes_are_pinned():
    from gpuemu import cases  # noqa: F401
    from tests.data.make_rng_vectors import sample_cases, vectors

    assert set(sample_cases()) == set(VECTORS["case_sha256"])
    assert vectors()["case_sha256"] == VECTORS["case_sha256"]


def test_lane_layout_matches_plain_python_reference():
    n = rng.LANES + 3
    got = rng.raw_u64(123, n)
    for j in (0, 1, 2, 4095, 4096, 4097, 4098):
        lane, step = j % rng.LANES, j // rng.LANES
        assert int(got[j]) == _ref_lane(123, lane, step + 1)[step]


def test_scalar_rng_equals_lane_zero():
    r = rng.Rng(77)
    v = rng.raw_u64(77, rng.LANES * 3)
    assert [r.next_u64() for _ in range(3)] == [int(v[0]), int(v[rng.LANES]), int(v[2 * rng.LANES])]


def test_exact_log_is_accurate():
    x = np.array([1e-300, 1e-20, 0.02425, 0.5, 0.7071, 0.99, 1.0])
    assert np.allclose(rng._exact_log(x), np.log(x), rtol=1e-14, atol=1e-15)


def test_normal_moments():
    z = rng.normal(5, 200_000)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    assert z.min() < -4 and z.max() > 4  # tails exist (the tail branch runs)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, M), st.integers(1, 5000))
def test_prefix_property(seed, n):
    """A shorter draw is a prefix of a longer one only within one step; the first n values never depend on n."""
    a = rng.raw_u64(seed, n)
    b = rng.raw_u64(seed, n + rng.LANES)
    assert np.array_equal(a, b[:n])


def test_below_is_in_range():
    r = rng.Rng(3)
    assert all(0 <= r.below(7) < 7 for _ in range(1000))
    assert {r.below(3) for _ in range(200)} == {0, 1, 2}
