"""Tolerances per device (device_tolerances in a rule pack, the built-in calibrated-cuda.yaml) and the pieces of a
CUDA run that can be checked without a GPU: the pack a CUDA fit writes, which launchers compile ahead."""

import pytest
import yaml

from gpuemu import calibrate, config
from gpuemu.errors import RulePackError
from gpuemu.runners import precompile
from gpuemu.target import load


def _pack(tmp_path, doc):
    p = tmp_path / "pack.yaml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def test_device_tolerances_apply_only_to_outputs_on_that_device(tmp_path):
    pack = _pack(tmp_path, {"tolerances": {"softmax": {"fp32": {"rtol": 1e-6, "atol": 0.0}}},
                            "device_tolerances": {"cuda": {"softmax": {"fp32": {"rtol": 3e-6, "atol": 0.0}}}}})
    table = config.resolve(rulepacks=[pack]).tolerance_table()
    assert table.get("softmax", "fp32").rtol == 1e-6
    assert table.get("softmax", "fp32", device="cuda:0").rtol == 3e-6
    assert "cuda.softmax.fp32" in table.get("softmax", "fp32", device="cuda").source
    # an op the device has no entry for keeps the table's own entry on that device
    assert table.get("rmsnorm", "fp32", device="cuda").rtol == table.get("rmsnorm", "fp32").rtol


def test_the_builtin_cuda_pack_says_where_it_came_from():
    from gpuemu.config import builtin_dir

    doc = yaml.safe_load((builtin_dir() / "calibrated-cuda.yaml").read_text())
    prov = doc["provenance"]
    assert prov["device"] == "cuda" and prov["capability"].startswith("sm_") and prov["gpu"]
    assert prov["torch"] and prov["triton"] and "driver" in prov
    assert set(doc["device_tolerances"]["cuda"]) == set(prov["ops"])
    assert not set(prov["not_fitted"]) & set(prov["ops"])


def test_a_bad_device_key_is_one_clear_rule_pack_error(tmp_path):
    pack = _pack(tmp_path, {"device_tolerances": {"rocm": {"softmax": {"fp32": {"rtol": 1e-6, "atol": 0}}}}})
    with pytest.raises(RulePackError, match="device_tolerances.rocm: device must be one of cuda"):
        config.resolve(rulepacks=[pack])
    pack = _pack(tmp_path, {"device_tolerances": {"cuda": {"softmax": {"fp64": {"rtol": 1e-6, "atol": 0}}}}})
    with pytest.raises(RulePackError, match="device_tolerances.cuda.softmax.fp64"):
        config.resolve(rulepacks=[pack])


def test_a_fit_on_cuda_is_written_as_the_devices_tolerances(monkeypatch, tmp_path):
    monkeypatch.setattr(calibrate, "device_provenance", lambda device: {"device": device, "gpu": "X", "capability": "sm_90"})
    fits = calibrate.calibrate("relu", samples=2)
    doc = yaml.safe_load(calibrate.rulepack_yaml(fits, command="c", seed=0, samples=2, device="cuda"))
    assert "tolerances" not in doc and doc["device_tolerances"]["cuda"]["relu"]["fp32"]["rtol"] == 0.0
    assert doc["name"] == "gpuemu-calibrated-cuda" and doc["provenance"]["gpu"] == "X"
    config.resolve(rulepacks=[_pack(tmp_path, doc)])  # and it reads back as a valid rule pack


def test_only_launchers_a_worker_can_import_again_compile_ahead():
    fn = load("examples/kernels/softmax.py:softmax")
    assert precompile.importable(fn, "examples/kernels/softmax.py:softmax")
    assert not precompile.importable(lambda x: x, "tests/x.py:<lambda>")

    def local(x):
        return x

    assert not precompile.importable(local, "tests/test_device_tolerances.py:local")
    main = type("F", (), {"__module__": "__main__", "__qualname__": "f"})()
    assert not precompile.importable(main, "script.py:f")


def test_a_cpu_lookahead_starts_only_once_compiles_cost_the_run_time(monkeypatch):
    from gpuemu.runtime import aot

    started = []
    monkeypatch.setattr(precompile, "start", lambda *a, **k: started.append(k) or precompile.Precompile())
    monkeypatch.setattr(precompile.os, "cpu_count", lambda: 2)
    look = precompile.Lookahead("examples/kernels/softmax.py:softmax", op="softmax", seed=1, dtypes=["fp32"],
                                strategy="default", iterations=100, requires={}, workers=8, targets=("sm_90",))
    assert look.workers == 1  # one core left for the loop
    assert look.poll(5) is None and not started  # no compile time spent yet
    monkeypatch.setitem(aot._stats, "seconds", aot._stats["seconds"] + 2.5)
    assert look.poll(90) is None  # too few cases left to gain from a process
    assert look.poll(10) is not None and started[0]["first"] == 10 and started[0]["device"] == "cpu"
    assert look.poll(11) is look.started and len(started) == 1
    monkeypatch.setattr(precompile.os, "cpu_count", lambda: 1)
    one = precompile.Lookahead("examples/kernels/softmax.py:softmax", op="softmax", seed=1, dtypes=["fp32"],
                               strategy="default", iterations=100, requires={}, workers=8, targets=("sm_90",))
    assert one.poll(10) is None  # one core: never

    def refused(*a, **k):
        raise OSError("no processes here")

    monkeypatch.setattr(precompile, "start", refused)
    monkeypatch.setattr(precompile.os, "cpu_count", lambda: 4)
    none = precompile.Lookahead("examples/kernels/softmax.py:softmax", op="softmax", seed=1, dtypes=["fp32"],
                                strategy="default", iterations=100, requires={}, workers=8, targets=("sm_90",))
    monkeypatch.setitem(aot._stats, "seconds", aot._stats["seconds"] + 2.5)
    assert none.poll(10) is None and none.poll(11) is None and none.workers == 0  # the loop goes on compiling


def test_a_cpu_worker_compiles_the_launch_checks_of_the_cases_from_the_last_back(tmp_path, monkeypatch):
    """The worker process checks (compiles) the launches of cases ``first`` .. last for the targets into
    Triton's disk cache, where the loop's own check then reads them; it runs no kernel."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    run = precompile.start("examples/kernels/softmax.py:softmax", op="softmax", seed=7, dtypes=["fp32"],
                           strategy="default", iterations=4, requires={}, workers=1, first=2, device="cpu",
                           targets=("sm_90",))
    run.processes[0].join(180)
    assert run.processes[0].exitcode == 0
    assert list(tmp_path.rglob("*.gpuemu-limits.json"))  # the checks of cases 3 and 2


def test_a_tolerances_source_names_only_the_files_that_hold_tolerances_for_its_device():
    # the CPU's bound came from default.yaml and calibrated.yaml; it used to list every rule pack, the CUDA one too
    from gpuemu import config

    table = config.resolve().tolerance_table()
    cpu = table.get("softmax", "fp32").source
    assert cpu.startswith("default.yaml+calibrated.yaml:") and "cuda" not in cpu and "hook.yaml" not in cpu
    cuda = table.get("softmax", "fp32", device="cuda").source
    assert "calibrated-cuda.yaml" in cuda and ":cuda.softmax.fp32" in cuda
