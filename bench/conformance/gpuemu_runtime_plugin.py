"""pytest plugin: every CPU Triton launch of the session runs on the gpuemu runtime (default settings).

Loaded with ``-p gpuemu_runtime_plugin`` (this folder on PYTHONPATH) by bench/conformance/run.py; xdist
workers load it too, so each worker process activates the runtime before its first test."""


def pytest_configure(config):
    import gpuemu.runtime as rt

    rt.activate()


def pytest_report_header(config):
    import gpuemu

    return f"gpuemu runtime active (gpuemu {gpuemu.__version__})"
