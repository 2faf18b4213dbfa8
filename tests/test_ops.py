import math

import pytest
import torch

from gpuemu import cases, ops
from gpuemu.errors import UnknownOp
from gpuemu.oracle import reference, to_reference_inputs

# the op table of shared/OPS.md
OPS_MD = ["add", "mul", "relu", "sigmoid", "tanh", "exp", "gelu", "gelu_tanh", "silu", "softplus", "swiglu", "geglu",
          "geglu_tanh", "sum", "mean", "amax", "argmax", "cumsum", "softmax", "log_softmax", "logsumexp", "layernorm",
          "rmsnorm", "matmul", "bmm", "linear", "attention", "cross_entropy", "rope", "embedding"]


def test_every_op_of_the_contract_is_registered():
    assert sorted(OPS_MD) == ops.names()


def test_unknown_op_suggests():
    with pytest.raises(UnknownOp, match="did you mean 'softmax'"):
        ops.get("sofmax")


@pytest.mark.parametrize("name", OPS_MD)
def test_reference_agrees_with_mpmath(name):
    """The fp64 reference and the independent mpmath element function agree on sampled elements."""
    spec = ops.get(name)
    case = cases.generate(name, 11, dtype="fp32", strategy="fixed")
    small = {d: min(v, 9) + (1 if name == "rope" and d == "D" and min(v, 9) % 2 else 0) for d, v in case.dims.items()}
    case = cases.with_dims(case, small, batch=(2,) if spec.has_batch else ())
    inputs, kwargs = cases.materialize(case)
    x64 = to_reference_inputs(spec, inputs)
    ref, scale = reference(spec, x64, kwargs)
    arrays = {k: (None if v is None else v.numpy()) for k, v in x64.items()}
    full = dict(spec.kwargs, **kwargs)
    flat = ref.reshape(-1)
    for i in sorted({0, flat.numel() // 2, flat.numel() - 1}):
        idx = _unravel(i, ref.shape)
        exact = float(spec.mp_element(arrays, full, idx))
        got = float(flat[i])
        assert math.isclose(got, exact, rel_tol=1e-12, abs_tol=1e-12), (name, idx, got, exact)
    if scale is not None:
        assert bool((scale >= 0).all())
        assert scale.shape == ref.shape


def _unravel(i, shape):
    out = []
    for s in reversed(tuple(shape)):
        out.append(i % s)
        i //= s
    return tuple(reversed(out))


def test_argmax_reference_takes_first_tie():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0]], dtype=torch.float64)
    ref, _ = reference(ops.get("argmax"), {"x": x}, {})
    assert ref.tolist() == [1]


def test_causal_attention_constraint():
    spec = ops.get("attention")
    assert spec.check_dims({"B": 1, "H": 1, "Nq": 5, "Nk": 3, "D": 4}, {"causal": True})
    assert spec.check_dims({"B": 1, "H": 1, "Nq": 3, "Nk": 5, "D": 4}, {"causal": True}) is None


def test_cli_ops_lists_every_op(capsys):
    from gpuemu.cli import main

    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in OPS_MD)
    assert main(["ops", "matmul"]) == 0
    assert "|a| @ |b|" in capsys.readouterr().out
