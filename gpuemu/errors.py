"""One exception root. User mistakes also subclass the matching builtin; the CLI turns them into one
line and exit code 2. Anything else escaping the CLI is a bug in gpuemu (exit 101)."""

from __future__ import annotations


def one_line(e: BaseException) -> str:
    """``Type: first line of the message``: how gpuemu quotes an exception it reports instead of raising."""
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


class GpuemuError(Exception):
    """Root of every error gpuemu raises on purpose."""


class InvalidArgument(GpuemuError, TypeError):
    """A call or flag was given a value gpuemu cannot use."""


class UnknownOp(GpuemuError, KeyError):
    """An op name that is not in the registry."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class TargetError(GpuemuError, ImportError):
    """A TARGET that does not import or is not callable."""


class RulePackError(GpuemuError, ValueError):
    """A malformed rule pack or project file: names file, key and reason."""


class StoreError(GpuemuError, OSError):
    """The failure store cannot be written or read."""


class SnapshotError(GpuemuError, ValueError):
    """A stored snapshot is missing, corrupt or was modified."""


class KernelFinding(Exception):
    """Raised from inside a launch by gpuemu's CPU runtime when the kernel itself did something wrong
    (an out-of-bounds access, a failed device_assert, configs that disagree, an unsupported construct).

    It is not a GpuemuError: it is a verdict about the kernel. The oracle turns it into a FAIL verdict of
    ``kind`` (e.g. "oob", "assert", "config", "unsupported") whose message is ``message``.
    """

    def __init__(self, kind: str, message: str, **details) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.details = details
