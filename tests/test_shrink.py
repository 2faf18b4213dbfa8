"""The shrinker's named passes and their statistics (gpuemu.shrink)."""

import torch

import gpuemu
from gpuemu.shrink import PASSES, ShrinkStats, candidates


def padded_softmax(x, block=32):
    """Softmax whose padding lanes (to a multiple of 32) enter the denominator as zeros: a tail-mask leak."""
    n = x.shape[-1]
    xp = torch.nn.functional.pad(x.float(), (0, (-n) % block), value=0.0)
    e = torch.exp(xp - x.float().amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True))[..., :n].to(x.dtype)


def test_candidates_sit_at_the_blocks():
    assert candidates(100, 1, [32]) == [1, 2, 3, 4, 31, 33, 50, 65, 68, 99]
    assert candidates(5, 4, []) == [4]
    assert candidates(1, 1, [32]) == []


def test_shrink_statistics_per_pass():
    r = gpuemu.fuzz(padded_softmax, op="softmax", iterations=40, seed=3, save=False, max_failures=1)
    st = r.shrink_stats
    assert set(st.tried) == set(PASSES) == set(st.to_dict())
    assert st.accepted["dims"] >= 1  # the failure was shrunk to a smaller N
    assert all(st.accepted[p] <= st.tried[p] for p in PASSES)
    assert st.spent == sum(st.tried.values()) <= 48 + 8  # the budget, plus the layout and value passes
    assert r.failures[0].case.dims["N"] < 32


def test_no_shrinking_no_statistics():
    r = gpuemu.fuzz(padded_softmax, op="softmax", iterations=40, seed=3, save=False, max_failures=1,
                    shrink_failures=False)
    assert r.shrink_stats.spent == 0 and r.shrink_stats.to_dict() == ShrinkStats().to_dict()
