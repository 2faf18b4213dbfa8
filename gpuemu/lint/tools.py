"""The NVIDIA tools the lint runs (cuobjdump, nvdisasm, ptxas, nvcc) and their versions.

Triton ships cuobjdump, nvdisasm and ptxas under ``triton/backends/nvidia/bin``; gpuemu uses those (through
Triton's own knobs where the installed version has them, so ``TRITON_CUOBJDUMP_PATH`` and friends are
honoured) and never needs a CUDA toolkit for Triton kernels. ``nvcc`` is only looked up on PATH, for ``.cu``.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import GpuemuError, InvalidArgument


class ToolError(GpuemuError, RuntimeError):
    """A compiler or binary tool is missing or failed on an input."""


@dataclass(frozen=True)
class Tool:
    name: str
    path: str
    version: str


def _triton_bin() -> Path | None:
    try:
        import triton
    except Exception:
        return None
    return Path(triton.__file__).resolve().parent / "backends" / "nvidia" / "bin"


def _version_of(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    m = re.search(r"release (\d+\.\d+), V([\d.]+)", out)
    return m.group(2) if m else (re.search(r"release (\d+\.\d+)", out) or [None, "unknown"])[1]


@functools.lru_cache(maxsize=None)
def nvidia_tool(name: str) -> Tool:
    """cuobjdump / nvdisasm / ptxas / ptxas-blackwell as Triton ships them (or as Triton's knobs point to).

    Raises :class:`ToolError` naming the way out when Triton's NVIDIA backend is not installed.
    """
    path = None
    try:
        from triton import knobs

        attr = name.replace("-", "_")
        tool = getattr(knobs.nvidia, attr, None)
        path = getattr(tool, "path", None)
    except Exception:  # triton < 3.4 has no knobs: fall back to the bundled binaries
        path = None
    if not path:
        b = _triton_bin()
        cand = b / name if b else None
        path = str(cand) if cand and cand.is_file() else shutil.which(name)
    if not path or not os.path.isfile(path):
        raise ToolError(f"{name} was not found: gpuemu lint reads Triton's bundled {name} "
                        f"(triton/backends/nvidia/bin); install triton with its NVIDIA backend (pip install triton)")
    return Tool(name, path, _version_of(path))


@functools.lru_cache(maxsize=None)
def nvcc() -> Tool | None:
    """nvcc from PATH, or None when there is none."""
    path = shutil.which("nvcc")
    return Tool("nvcc", path, _version_of(path)) if path else None


def run(cmd: list[str], *, what: str, timeout: float = 300) -> str:
    """Run a tool; its stdout, or a ToolError that quotes the command and the tool's own message."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ToolError(f"{what}: {Path(cmd[0]).name} took more than {timeout:.0f} s") from None
    except OSError as e:
        raise ToolError(f"{what}: cannot run {cmd[0]}: {e.strerror or e}") from None
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise ToolError(f"{what}: {Path(cmd[0]).name} exited {proc.returncode}: {msg[-1] if msg else 'no message'}")
    return proc.stdout


def _with_file(data: bytes, suffix: str, fn):
    with tempfile.TemporaryDirectory(prefix="gpuemu-lint-") as d:
        p = Path(d) / f"kernel{suffix}"
        p.write_bytes(data)
        return fn(str(p))


def resource_usage(cubin: bytes | str | os.PathLike) -> str:
    """``cuobjdump --dump-resource-usage`` of a cubin given as bytes or a path."""
    tool = nvidia_tool("cuobjdump")
    if isinstance(cubin, (bytes, bytearray)):
        return _with_file(bytes(cubin), ".cubin", lambda p: run([tool.path, "--dump-resource-usage", p],
                                                                   what="reading resource usage"))
    return run([tool.path, "--dump-resource-usage", os.fspath(cubin)], what="reading resource usage")


def disassemble(cubin: bytes | str | os.PathLike) -> str:
    """SASS of a cubin (``nvdisasm -c``; about half a second per cubin whatever its size, hence opt-in)."""
    tool = nvidia_tool("nvdisasm")
    cmd = [tool.path, "-c", "-ndf"]
    if isinstance(cubin, (bytes, bytearray)):
        return _with_file(bytes(cubin), ".cubin", lambda p: run(cmd + [p], what="disassembling SASS"))
    return run(cmd + [os.fspath(cubin)], what="disassembling SASS")


def ptxas_verbose(ptx: str, arch: str) -> str:
    """``ptxas -v`` on a PTX text for ``arch`` (e.g. ``sm_90a``): its log (used when Triton's was not captured)."""
    cap = int(re.sub(r"\D", "", arch) or 0)
    tool = nvidia_tool("ptxas-blackwell" if cap >= 100 else "ptxas")
    with tempfile.TemporaryDirectory(prefix="gpuemu-lint-") as d:
        src = Path(d) / "kernel.ptx"
        src.write_text(ptx)
        proc = subprocess.run([tool.path, "-v", f"--gpu-name={arch}", str(src), "-o", str(Path(d) / "k.cubin")],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise ToolError(f"ptxas -v failed for {arch}: {(proc.stderr or '').strip().splitlines()[-1:]}")
        return proc.stderr + proc.stdout


def nvcc_compile(source: Path, arch: str, out_dir: Path, extra: list[str] | None = None) -> tuple[bytes, str, str]:
    """Compile a ``.cu`` file for ``arch`` with nvcc: (cubin bytes, PTX text, ptxas -v log)."""
    tool = nvcc()
    if tool is None:
        raise InvalidArgument(f"{source}: linting CUDA C needs nvcc on PATH (install the CUDA toolkit), "
                              f"or lint Triton kernels only")
    num = arch.removeprefix("sm_")
    cubin, ptx = out_dir / "kernel.cubin", out_dir / "kernel.ptx"
    flags = list(extra or [])
    proc = subprocess.run([tool.path, "-cubin", f"-arch=sm_{num}", "-lineinfo", "-Xptxas", "-v", *flags,
                           str(source), "-o", str(cubin)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        raise InvalidArgument(f"{source}: nvcc failed for sm_{num}: {tail[-1] if tail else 'no message'} "
                              f"(fix the compile error or pass flags with --nvcc-flag)")
    run([tool.path, "-ptx", f"-arch=compute_{num}", *flags, str(source), "-o", str(ptx)], what=f"nvcc -ptx {source}")
    return cubin.read_bytes(), ptx.read_text(), proc.stderr + proc.stdout
