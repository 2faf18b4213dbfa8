"""Importing parts of :mod:`gpuemu.hook` without installing the hook.

``import gpuemu.hook`` installs the production hook (that is its purpose), and Python runs a package's
``__init__`` before any of its submodules, so ``from gpuemu.hook import replay_record`` would install it
too. ``gpuemu reproduce`` and other tools that only need the hook's replay or judging code import it
inside :func:`no_autoinstall`.

>>> with no_autoinstall():
...     pass
"""

from __future__ import annotations

import contextlib
from typing import Iterator

_depth = 0


@contextlib.contextmanager
def no_autoinstall() -> Iterator[None]:
    """Imports of gpuemu.hook inside the block do not install the hook (``gpuemu.hook.install()`` still does)."""
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1


def suppressed() -> bool:
    return _depth > 0
