"""docs/gate.md stays true: its table of manifest keys is the manifest's own table, its workflow is complete and
uses only the Action's inputs, and (slow: ~50 s) every command it shows gives the documented output in a fresh
copy of the repository, with the workflow run through the Action's script (scripts/gate_doc.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = open(os.path.join(ROOT, "docs", "gate.md")).read()
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import gate_doc  # noqa: E402


def test_the_keys_table_is_the_manifests_table():
    from gpuemu.check.manifest import KEYS

    section = DOC.split("### The manifest's keys", 1)[1].split("\n\n", 3)[2]
    rows = [[c.strip().strip("`") for c in ln.strip("|").split("|")] for ln in section.splitlines()[2:]]
    assert [(r[0], r[1]) for r in rows] == [(k.name, k.where) for k in KEYS.values()]
    for r in rows:
        text = KEYS[r[0]].text.replace("'gpuemu ops'", "`gpuemu ops`").replace("--select", "`--select`")
        assert r[2].replace("`", "").startswith(text.replace("`", "")), (r, text)


def test_the_pytest_section_lists_the_markers_table():
    from gpuemu.pytest_plugin import MARK_KEYS

    listed = re.search(r"one table \(`MARK_KEYS` in `gpuemu/pytest_plugin.py`: (.*?)\):", DOC, re.S).group(1)
    assert re.findall(r"`(\w+)`", listed) == list(MARK_KEYS)


def test_the_workflow_is_complete_and_uses_only_the_actions_inputs():
    wf = gate_doc.workflow(DOC)
    action = yaml.safe_load(open(os.path.join(ROOT, "action.yml")))
    assert wf["name"] and {"pull_request", "push"} <= set(wf[True] if True in wf else wf["on"])  # yaml: on -> True
    assert wf["permissions"] == {"contents": "read", "actions": "read", "security-events": "write"}
    (job,) = wf["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    uses = [s.get("uses", "") for s in job["steps"]]
    assert uses[:2] == ["actions/checkout@v4", "actions/setup-python@v5"] and uses[2].endswith("/gpuemu@<ref>")
    assert set(job["steps"][2]["with"]) <= set(action["inputs"])
    # every input and output the page names exists
    inputs = re.search(r"Its inputs: (.*?)\. Its outputs", DOC, re.S).group(1)
    assert set(re.findall(r"`([\w-]+)`", inputs.split("(split")[0] + inputs.split(")", 1)[1])) == set(action["inputs"])


@pytest.mark.slow
def test_every_command_of_the_page_gives_the_documented_output_on_a_fresh_copy():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gate_doc.py")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stderr[-5000:]
    assert p.stderr.count("the documented output, exactly") == 2  # docs/gate.md and the README's gate section
