"""One writer of a fuzz run's text (gpuemu.reporting): the CLI and raise_for_failures read the same lines."""

import pytest
import torch

import gpuemu
from gpuemu import reporting


def padded_softmax(x, block=32):
    n = x.shape[-1]
    xp = torch.nn.functional.pad(x.float(), (0, (-n) % block), value=0.0)
    e = torch.exp(xp - x.float().amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True))[..., :n].to(x.dtype)


def test_report_tells_the_first_failure_whole():
    r = gpuemu.fuzz(padded_softmax, op="softmax", iterations=20, seed=3, save=False)
    text = r.report()
    lines = text.splitlines()
    first = r.failures[0]
    assert lines[:3] == [first.line(), f"replay: {first.replay_line()}", f"case: {first.case.describe()}"]
    assert (f"shrunk from: {first.original.describe()}" in lines) == (first.original is not None)
    assert "  Mismatched elements:" in text  # the detail, indented
    assert lines[-1] == r.summary()
    with pytest.raises(AssertionError) as e:
        r.raise_for_failures()
    assert text in str(e.value)
    timed = reporting.report(r, timing=True, more_note=" (--json for all)")
    assert timed.startswith(f"seed 0x{r.seed:x} · ") and timed.endswith(text.splitlines()[-1])
    if len(r.failures) > reporting.SHOWN:
        assert f"... and {len(r.failures) - reporting.SHOWN} more failing seeds (--json for all)" in timed


def test_a_clean_run_is_its_summary():
    r = gpuemu.fuzz(lambda x: torch.softmax(x.float(), -1).to(x.dtype), op="softmax", iterations=5, seed=1,
                    save=False)
    assert r.report() == r.summary() == "Passed: 5/5"
