import json
import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuemu import cases, ops
from gpuemu.errors import SnapshotError, StoreError
from gpuemu.store import Store, decode_tensors, encode_tensors


def _raw(t):
    return torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage()).clone()


@settings(max_examples=25, deadline=None)
@given(op=st.sampled_from(["softmax", "matmul", "linear", "embedding", "attention", "rope"]),
       seed=st.integers(0, 2**64 - 1), dtype=st.sampled_from(["fp32", "fp16", "bf16"]))
def test_snapshot_round_trip_keeps_bytes_and_geometry(op, seed, dtype):
    c = cases.generate(op, seed, dtype=dtype, strategy="strided")
    t, _ = cases.materialize(c)
    back = decode_tensors(encode_tensors(t))
    assert set(back) == set(t)
    for k, v in t.items():
        if v is None:
            assert back[k] is None
            continue
        w = back[k]
        assert w.dtype == v.dtype and w.shape == v.shape and w.stride() == v.stride()
        assert w.storage_offset() == v.storage_offset()
        assert torch.equal(_raw(w), _raw(v))  # NaN poison in the gaps included


def _record(seed=0xABC, target="t.py:f"):
    c = cases.Case(op="relu", dtype="fp32", dims={"N": 4}, seed=seed)
    return {"case": c.to_dict(), "target": target, "op": "relu", "tolerance": {"rtol": 1e-5, "atol": 1e-6},
            "verdict": {"status": "fail", "kind": "mismatch", "message": "m"}}, {"x": torch.arange(4.0)}


def test_save_fetch(store):
    st_ = Store(store)
    rec, t = _record()
    path = st_.save(rec, t)
    assert path.name.startswith("0xabc--")
    got, tensors = st_.fetch("0xabc")
    assert got["target"] == "t.py:f" and torch.equal(tensors["x"], t["x"])
    assert st_.fetch("ab")[0]["case"]["seed"] == 0xABC  # unique prefix
    assert len(st_.list()) == 1


def test_tampered_snapshot_is_one_clear_error(store):
    st_ = Store(store)
    rec, t = _record()
    st_.save(rec, t)
    snap = next((store / "snapshots").glob("*.safetensors"))
    data = bytearray(snap.read_bytes())
    data[-1] ^= 0xFF
    snap.write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match="corrupt or was modified"):
        st_.fetch("0xabc")
    snap.unlink()
    with pytest.raises(SnapshotError, match="missing"):
        st_.fetch("0xabc")


def test_missing_ambiguous_and_bad_seeds(store):
    st_ = Store(store)
    with pytest.raises(SnapshotError, match="no failure store"):
        st_.fetch("0x1")
    st_.save(*_record(seed=0x1234))
    st_.save(*_record(seed=0x1299))
    with pytest.raises(SnapshotError, match="ambiguous"):
        st_.fetch("0x12")
    with pytest.raises(SnapshotError, match="no stored failure"):
        st_.fetch("0x777")
    with pytest.raises(SnapshotError, match="not a hex seed"):
        st_.fetch("zz")
    (store / "failures" / "0x1234--t.py_f.json").write_text("{not json")
    with pytest.raises(SnapshotError, match="corrupt"):
        st_.fetch("0x1234")


def test_same_seed_two_targets(store):
    st_ = Store(store)
    st_.save(*_record(seed=0x55, target="a.py:f"))
    st_.save(*_record(seed=0x55, target="b.py:g"))
    with pytest.raises(SnapshotError, match="ambiguous"):
        st_.fetch("0x55")
    assert st_.fetch("0x55", target="b.py")[0]["target"] == "b.py:g"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unwritable_store(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    with pytest.raises(StoreError, match="cannot write the failure store"):
        Store(ro / "s").ensure_writable()


def test_store_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StoreError, match="cannot write the failure store"):
        Store(f).ensure_writable()


def test_size_cap(store):
    st_ = Store(store, max_bytes=10)
    with pytest.raises(StoreError, match="size cap"):
        st_.save(*_record())


def test_record_is_json_with_schema(store):
    st_ = Store(store)
    path = st_.save(*_record())
    rec = json.loads(path.read_text())
    assert rec["schema_version"] == 2 and len(rec["snapshot"]["sha256"]) == 64
    assert ops.get(rec["case"]["op"])


def test_an_older_record_is_read_and_a_newer_one_refused_in_one_line(store):
    """The version rule (gpuemu.store.SCHEMA_VERSION): formats 1..SCHEMA_VERSION are read (an older one migrated),
    a newer one is refused with one line naming both versions and the upgrade."""
    from gpuemu.errors import SnapshotError
    from gpuemu.store import validate_record

    st_ = Store(store)
    rec = json.loads(st_.save(*_record()).read_text())
    assert validate_record(dict(rec, schema_version=1), "old.json")["schema_version"] == 2
    with pytest.raises(SnapshotError) as e:
        validate_record(dict(rec, schema_version=3, gpuemu="9.0"), "new.json")
    msg = str(e.value)
    assert "\n" not in msg and "gpuemu 9.0 in record format 3" in msg and "reads formats 1 to 2" in msg
    assert "pip install -U gpuemu" in msg


def test_snapshot_bytes_do_not_depend_on_the_process():
    """The content hash names a snapshot: the same tensors must give the same bytes in every process (safetensors
    orders its header by a per-process hash map)."""
    import subprocess
    import sys

    code = ("import hashlib, torch; from gpuemu.store import encode_tensors; "
            "t = {k: torch.arange(12.).reshape(3, 4)[:, 1:] for k in 'abcdefgh'}; "
            "print(hashlib.sha256(encode_tensors(t)).hexdigest())")
    got = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
           for _ in range(3)}
    assert len(got) == 1


def test_launchers_checked_in_parallel_can_all_probe_one_store(tmp_path):
    """``gpuemu check --jobs N`` starts N fuzz runs on one store; each probes it for writing. With one shared
    probe name, one run unlinked the probe another had just written and that launcher ended in ERROR
    ("cannot write the failure store"): 139 of 2,400 probes from 8 threads failed that way."""
    import threading

    from gpuemu.errors import GpuemuError

    errors: list[str] = []

    def probe() -> None:
        st_ = Store(tmp_path / "shared")
        for _ in range(300):
            try:
                st_.ensure_writable()
            except GpuemuError as e:
                errors.append(str(e))

    threads = [threading.Thread(target=probe) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert not [p for p in (tmp_path / "shared").iterdir() if p.name.startswith(".write-probe")]
