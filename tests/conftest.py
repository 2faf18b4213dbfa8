import os

# Triton reads TRITON_INTERPRET when a kernel is decorated: set it before any test module imports kernels.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store"


@pytest.fixture(autouse=True)
def _no_user_settings(monkeypatch, tmp_path):
    for var in ("GPUEMU_STORE", "GPUEMU_RULEPACK", "GPUEMU_MODE", "GPUEMU_SAMPLE_RATE", "GPUEMU_BUDGET"):
        monkeypatch.delenv(var, raising=False)
