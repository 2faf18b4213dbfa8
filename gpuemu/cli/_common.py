"""Shared CLI plumbing: choosing the device before a target is imported, writing JSON."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..errors import InvalidArgument, StoreError


def prepare_device(choice: str) -> str:
    """Pick the device and, for the CPU, turn on Triton's interpreter before any kernel is decorated."""
    if choice not in ("auto", "cpu", "cuda"):
        raise InvalidArgument(f"--device {choice!r}: use auto, cpu or cuda")
    if choice == "auto":
        import torch

        choice = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0") else "cpu"
    if choice == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    elif choice == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InvalidArgument("--device cuda: no CUDA device is available here; use --device cpu")
    return choice


def write_json(dest: str, payload: dict) -> None:
    text = json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n"
    if dest == "-":
        sys.stdout.write(text)
        return
    try:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(dest + f".tmp{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, dest)
    except OSError as e:
        raise StoreError(f"cannot write --json {dest}: {e.strerror or e}") from None


def check_writable(dest: str, flag: str, *, create: bool = True) -> None:
    """Fail before the run, with one line, when ``dest`` cannot be written (a file where a folder is needed,
    a read-only folder, a directory given as the file). ``create=False``: its folder must exist already
    (gpuemu check creates no folder it was not asked for). Nothing is left behind."""
    import tempfile

    path = Path(dest)
    if path.is_dir():
        raise StoreError(f"cannot write {flag} {dest}: it is a directory; give a file path")
    parent = path.parent
    if not create and not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise StoreError(f"cannot write {flag} {dest}: the folder {parent} {what}; create it first or choose "
                         "another path")
    probe_dir = parent
    while not probe_dir.exists():
        probe_dir = probe_dir.parent
    if not probe_dir.is_dir():
        raise StoreError(f"cannot write {flag} {dest}: {probe_dir} is not a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise StoreError(f"cannot write {flag} {dest}: the file is not writable")
    try:
        with tempfile.NamedTemporaryFile(dir=probe_dir, prefix=".gpuemu-probe-"):
            pass
    except OSError as e:
        raise StoreError(f"cannot write {flag} {dest}: {e.strerror or e}") from None


def err(msg: str = "") -> None:
    print(msg, file=sys.stderr, flush=True)
