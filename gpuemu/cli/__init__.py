"""The ``gpuemu`` command: ``main(argv) -> int``.

Exit codes: 0 all passed, 1 failures or findings, 2 usage or configuration error (one clear line),
101 a bug in gpuemu itself (with the traceback and a request to report it).
"""

from __future__ import annotations

import argparse
import sys
import traceback

from ..errors import GpuemuError

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 101


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit 2, like every other usage error
        self.exit(EXIT_USAGE, f"gpuemu: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    from . import bench, calibrate, check, fuzz, keygen, lint, ops, reproduce, verify

    p = _Parser(prog="gpuemu", description="Catch silently-wrong GPU kernels, without a GPU.")
    p.add_argument("--version", action="version", version=f"gpuemu {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in (fuzz, reproduce, ops, calibrate, bench, lint, check, keygen, verify):
        mod.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    import os

    # a launcher module may import TensorFlow: its C++ INFO and WARNING lines (oneDNN, CPU features, absl) would mix
    # into gpuemu's report; TensorFlow reads this when it loads. A level the user set is kept.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.run(args))
    except GpuemuError as e:
        print(f"gpuemu: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("gpuemu: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `gpuemu ... | head`: the reader left; nothing more to say, and nowhere to say it
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush of stdout would raise again
        return 141
    except Exception:  # a bug in gpuemu, not a user mistake
        traceback.print_exc()
        print("gpuemu: internal error: this is a bug in gpuemu; please report it with the traceback above",
              file=sys.stderr)
        return EXIT_BUG


def entry() -> None:
    sys.exit(main())
