"""Where a record's code comes from: finding a stored failure's launcher on another machine or directory, and
whether replaying it (which imports and runs that file) needs ``--trust``.

A record names its launcher relative to the project it was found in (the git checkout holding the launcher's
file, else the working directory of the run), with the checkout's commit, and who wrote it (a hash of the machine
and the user, nothing readable). A replay finds the file as the record names it, from the working directory, from
the top of the checkout the working directory is in, and from the folder holding the store. It runs without
``--trust`` when the file it found is

- inside the working directory, or tracked by git in the checkout the working directory is in (the user's own
  code: a CI failure replayed on a clone of the same project), or
- the file the record names, by its absolute path, on the machine and for the user that wrote the record (the
  line a run printed, pasted in another directory).

Anything else (a record copied from elsewhere naming a file outside the user's checkout) needs ``--trust``.

While a replay imports a launcher's module, :func:`replaying` is set: a script that calls ``gpuemu.fuzz`` or
installs the hook at import time (the launcher defined beside the call) does not fuzz again or check again, and
the store is not rewritten (:func:`gpuemu.fuzz` returns an empty result saying so).
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import hashlib
import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Iterator

_state = threading.local()


@contextlib.contextmanager
def replaying() -> Iterator[None]:
    """While a replay imports the module a record names."""
    before = getattr(_state, "on", False)
    _state.on = True
    try:
        yield
    finally:
        _state.on = before


def is_replaying() -> bool:
    return getattr(_state, "on", False)


@functools.lru_cache(maxsize=1)
def writer_id() -> str:
    """Who writes records here: a hash of the machine and the user (no name in the clear)."""
    machine = ""
    for p in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        with contextlib.suppress(OSError):
            machine = Path(p).read_text().strip()
            break
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name: the uid still says who
        user = str(os.getuid()) if hasattr(os, "getuid") else ""
    return hashlib.sha256(f"{machine}|{socket.gethostname()}|{user}".encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=64)
def checkout_of(folder: str) -> str | None:
    """The top of the git checkout holding ``folder``; None outside one (or without git)."""
    try:
        out = subprocess.run(["git", "-C", folder, "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def commit_of(folder: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def tracked(path: Path, checkout: str) -> bool:
    """``path`` is a file git tracks in ``checkout``."""
    try:
        out = subprocess.run(["git", "-C", checkout, "ls-files", "--error-unmatch", str(path)], capture_output=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


def _file_part(target: str) -> str | None:
    mod = target.rpartition(":")[0]
    return mod if mod.endswith(".py") or "/" in mod or os.sep in mod else None


def portable(target: str) -> dict:
    """What a record says of a ``file.py:function`` target: the path relative to its project (git checkout, else the
    working directory), the checkout's commit, and its writer. ``{}`` for ``pkg.module:function`` targets."""
    f = _file_part(target)
    if f is None:
        return {}
    path = Path(f).resolve()
    top = checkout_of(str(path.parent)) or str(Path.cwd().resolve())
    try:
        rel = path.relative_to(top)
    except ValueError:
        rel = None
    out = {"file": str(path), "writer": writer_id()}
    if rel is not None:
        out["relative"] = rel.as_posix()
        out["function"] = target.rpartition(":")[2]
        commit = commit_of(top)
        if commit:
            out["commit"] = commit
    return out


def resolve(target: str, origin: dict | None, store_root: Path | None = None) -> str:
    """The target as it can be imported here: as named when that file exists, else the file the record was written
    from (its absolute path, when it exists here: the same machine, any working directory), else the record's
    project-relative path from the working directory, the top of its checkout, or the folder holding the store."""
    f = _file_part(target)
    if f is None or Path(f).is_file() or not origin:
        return target
    func = origin.get("function", target.rpartition(":")[2])
    if origin.get("file") and Path(origin["file"]).is_file():  # where it was written, from any directory here
        return f"{origin['file']}:{func}"
    if "relative" not in origin:
        return target
    rel = origin["relative"]
    bases = [Path.cwd()]
    top = checkout_of(str(Path.cwd()))
    if top:
        bases.append(Path(top))
    if store_root is not None:
        bases += [store_root.resolve().parent, store_root.resolve().parent.parent]
    for base in bases:
        cand = base / rel
        if cand.is_file():
            return f"{cand}:{func}"
    return target


def needs_trust(target: str, origin: dict | None) -> str | None:
    """Why replaying ``target`` (as resolved here) needs ``--trust``; None when it is the user's own code (see the
    module docstring)."""
    f = _file_part(target)
    if f is None:
        return None
    path = Path(f).resolve()
    cwd = Path.cwd().resolve()
    if path.is_relative_to(cwd):
        return None
    top = checkout_of(str(cwd))
    if top and path.is_relative_to(Path(top).resolve()) and tracked(path, top):
        return None
    if origin and origin.get("writer") == writer_id() and origin.get("file") == str(path):
        return None
    return (f"{path} is outside this directory and its checkout, and this record was not written here by this user; "
            "replaying imports and runs it: check it, then pass --trust")
