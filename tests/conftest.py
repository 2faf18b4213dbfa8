import os

# Triton reads TRITON_INTERPRET when a kernel is decorated: set it before any test module imports kernels.
os.environ.setdefault("TRITON_INTERPRET", "1")
# An empty Triton cache per session, as CI has: a warm cache skips code generation and hid a failing compile.
if "TRITON_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpuemu-test-triton-cache-")
    atexit.register(shutil.rmtree, os.environ["TRITON_CACHE_DIR"], ignore_errors=True)

import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store"


@pytest.fixture
def rt():
    """gpuemu's CPU runtime, active for the test; its settings are restored afterwards."""
    import dataclasses

    from gpuemu import runtime

    before = runtime.settings()
    runtime.activate()
    try:
        yield runtime
    finally:
        runtime.deactivate()
        runtime.configure(**dataclasses.asdict(before))


@pytest.fixture(autouse=True)
def _no_user_settings(monkeypatch, tmp_path):
    for var in ("GPUEMU_STORE", "GPUEMU_RULEPACK", "GPUEMU_MODE", "GPUEMU_SAMPLE_RATE", "GPUEMU_BUDGET"):
        monkeypatch.delenv(var, raising=False)
