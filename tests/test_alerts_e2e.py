"""Alerts proven end to end: a real Prometheus server (OS package) on loopback scrapes a training process
whose hook exports through the OpenTelemetry SDK's Prometheus exporter; after a clean phase that Prometheus
has seen (and on which the rule does not fire), one divergence is planted, and Prometheus' own rule
evaluation of examples/otel/alert-rules.yaml fires GpuemuKernelDivergence, read through its HTTP API.
The metric names the rules use are checked against gpuemu's instruments and against what was scraped."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from gpuemu import telemetry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = os.path.join(ROOT, "examples", "otel", "alert-rules.yaml")
TRAIN = os.path.join(ROOT, "examples", "otel", "train_prometheus.py")
SERVICE = "gpuemu-train-e2e"

pytestmark = pytest.mark.prometheus


def _unavailable(why: str):
    """Skip where the OS package is missing; under `make test-gate-e2e` (GPUEMU_REQUIRE_E2E=1) that is a failure."""
    if os.environ.get("GPUEMU_REQUIRE_E2E") == "1":
        pytest.fail(f"GPUEMU_REQUIRE_E2E=1 but {why}")
    pytest.skip(why)


def _import_or_unavailable(name: str):
    try:
        return __import__(name, fromlist=["_"])
    except ImportError:
        _unavailable(f"the Python package {name} is not installed (pip install -e '.[dev]')")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str, **params) -> dict:
    url = f"http://127.0.0.1:{port}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _wait(what: str, cond, timeout: float, proc_logs: list[str]) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = cond()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; process output:\n" + "".join(proc_logs[-40:]))


def _prometheus_names() -> dict[str, str]:
    """gpuemu's counters as the OpenTelemetry -> Prometheus conversion names them ('.' -> '_', + '_total')."""
    return {name: name.replace(".", "_") + "_total"
            for name in (telemetry.CHECKS, telemetry.DIVERGENCES, telemetry.INTERNAL_ERRORS)}


def test_rule_metric_and_label_names_are_what_gpuemu_emits():
    rules = yaml.safe_load(open(RULES))["groups"][0]["rules"]
    text = " ".join(r["expr"] + " " + json.dumps(r.get("annotations", {})) for r in rules)
    metrics = set(re.findall(r"\bgpuemu_shadow_[a-z_]+", text))
    assert metrics and metrics <= set(_prometheus_names().values()), metrics - set(_prometheus_names().values())
    # labels: every attribute key gpuemu's telemetry writes, '.' -> '_' as the exporter converts them
    emitted = {k.replace(".", "_") for k in re.findall(r'"(gpuemu\.[a-z_.]+)"', open(telemetry.__file__).read())}
    labels = set(re.findall(r"\bgpuemu_[a-z_]+", text)) - metrics
    assert labels and labels <= emitted, labels - emitted


@pytest.fixture
def prometheus(tmp_path):
    binary = shutil.which("prometheus")
    if binary is None:
        _unavailable("no prometheus server here (make test-gate-e2e installs it)")
    _import_or_unavailable("opentelemetry.exporter.prometheus")
    _import_or_unavailable("opentelemetry.sdk")
    promtool = shutil.which("promtool")
    if promtool:
        subprocess.run([promtool, "check", "rules", RULES], check=True, capture_output=True)
    exporter_port, prom_port = _free_port(), _free_port()
    shutil.copy(RULES, tmp_path / "alert-rules.yaml")
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["alert-rules.yaml"],
        "scrape_configs": [{"job_name": "train", "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}]}],
    }))
    logs: list[str] = []
    proc = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    threading.Thread(target=lambda: [logs.append("prometheus: " + ln) for ln in proc.stdout], daemon=True).start()
    try:
        _wait("prometheus ready", lambda: urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/-/ready",
                                                                 timeout=2).status == 200, 60, logs)
        yield prom_port, exporter_port, logs
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _divergence_alerts(port: int) -> list[dict]:
    return [a for a in _get(port, "/api/v1/alerts")["data"]["alerts"] if a["labels"]["alertname"] == "GpuemuKernelDivergence"]


def test_planted_divergence_fires_the_alert_in_prometheus(prometheus, tmp_path):
    prom_port, exporter_port, logs = prometheus
    go = tmp_path / "plant-now"
    env = dict(os.environ, TRITON_INTERPRET="1")
    for var in ("GPUEMU_MODE", "GPUEMU_SAMPLE_RATE", "GPUEMU_BUDGET", "GPUEMU_STORE", "GPUEMU_RULEPACK"):
        env.pop(var, None)
    train = subprocess.Popen([sys.executable, TRAIN, "--port", str(exporter_port), "--service", SERVICE, "--steps", "10",
                              "--diverge-at", "6", "--step-seconds", "0.3", "--serve", "300", "--store",
                              str(tmp_path / "store"), "--wait-for", str(go)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    out: list[str] = []
    threading.Thread(target=lambda: [out.append(ln) for ln in train.stdout], daemon=True).start()
    try:
        _wait("the training loop to reach the planted step", lambda: "waiting\n" in out, 180, out)
        # the clean phase as Prometheus sees it: checks scraped, the rule evaluated, nothing firing
        q = f'gpuemu_shadow_checks_total{{service_name="{SERVICE}",gpuemu_outcome="pass"}}'
        _wait("prometheus to scrape the clean checks",
              lambda: _get(prom_port, "/api/v1/query", query=q)["data"]["result"], 60, logs + out)
        rules = _get(prom_port, "/api/v1/rules")["data"]["groups"][0]["rules"]
        div_rule = next(r for r in rules if r["name"] == "GpuemuKernelDivergence")
        _wait("a rule evaluation after the first scrape", lambda: any(
            r["name"] == "GpuemuKernelDivergence" and r.get("lastEvaluation", "").startswith("20") and
            r["health"] == "ok" for r in _get(prom_port, "/api/v1/rules")["data"]["groups"][0]["rules"]), 30, logs)
        time.sleep(2.5)  # two more scrape + evaluation rounds of the clean phase
        assert _divergence_alerts(prom_port) == [], "the alert fired before any divergence"
        assert div_rule["health"] == "ok"

        go.write_text("")
        _wait("the planted step", lambda: "diverged\n" in out, 120, out)
        alerts = _wait("GpuemuKernelDivergence to fire", lambda: [a for a in _divergence_alerts(prom_port)
                                                                 if a["state"] == "firing"], 60, logs + out)
        (alert,) = alerts
        assert alert["labels"]["service_name"] == SERVICE and alert["labels"]["gpuemu_kernel"] == "rmsnorm"
        assert alert["labels"]["gpuemu_source"] == "shadow" and alert["labels"]["severity"] == "page"
        assert "diverged from its fp64 reference" in alert["annotations"]["summary"]
        assert any(ln.startswith("FAIL seed=0x") for ln in out) and any(ln.startswith("replay: gpuemu reproduce") for ln in out)

        # why the rule has its second branch: increase() alone never sees the planted (single) divergence
        time.sleep(2.5)
        only_increase = ("sum by (service_name, gpuemu_source, gpuemu_kernel, gpuemu_dtype) "
                         "(increase(gpuemu_shadow_divergences_total[10m])) > 0")
        assert _get(prom_port, "/api/v1/query", query=only_increase)["data"]["result"] == []
        assert _divergence_alerts(prom_port)[0]["state"] == "firing"

        # every gpuemu instrument this run used arrived in Prometheus under the name the rules and README use
        names = set(_get(prom_port, "/api/v1/label/__name__/values")["data"])
        for n in (_prometheus_names()[telemetry.CHECKS], _prometheus_names()[telemetry.DIVERGENCES],
                  "gpuemu_shadow_duration_seconds_bucket"):
            assert n in names, (n, sorted(x for x in names if x.startswith("gpuemu")))
        print("\n".join(sorted(x for x in names if x.startswith("gpuemu"))))
        print(json.dumps(alert, indent=1))
    finally:
        train.terminate()
        try:
            train.wait(timeout=20)
        except subprocess.TimeoutExpired:
            train.kill()
