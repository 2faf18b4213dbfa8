"""``gpuemu reproduce SEED``: re-run a stored failure on its exact stored input bytes.

A failure is (target, seed): ``--target`` picks among records of several targets with the same seed (the
replay line printed by ``gpuemu fuzz`` carries it when the store holds several targets). Records are
validated before anything runs; hook records re-run user code only with ``--trust``.
"""

from __future__ import annotations

from ._common import check_writable, err, prepare_device, write_json


def register(sub) -> None:
    p = sub.add_parser("reproduce", help="replay a stored failure from its seed",
                       description="Re-run the launcher on the exact stored inputs of a failing seed.")
    p.add_argument("seed", metavar="SEED", nargs="?", help="the seed printed after 'replay:' (hex, or a unique prefix)")
    p.add_argument("--store", metavar="DIR", default=None, help="failure store (default: .gpuemu, or GPUEMU_STORE)")
    p.add_argument("--target", default=None, help="pick among records of several targets with the same seed")
    p.add_argument("--list", action="store_true", help="list the stored failures (and any corrupt records)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--trust", action="store_true",
                   help="hook records: import the module the record names and re-run the call (importing runs "
                        "that module's code; without it only the recorded output is re-judged); fuzz records: "
                        "allow a target file outside the current directory")
    p.add_argument("--recompile", action="store_true", help="hook graph records: compile the stored graph again here")
    p.add_argument("--json", metavar="PATH", default=None, help="write the replay as JSON ('-' for stdout)")
    p.set_defaults(run=run)


def run(args) -> int:
    from .. import config
    from ..errors import InvalidArgument, SnapshotError
    from ..store import Store

    if args.json and args.json != "-":
        check_writable(args.json, "--json")
    if args.list:
        st = Store(config.resolve(store=args.store).store)
        rows, bad = st.scan()
        for r in rows:
            err(r.record.get("line", "?") + f"  [{r.record.get('target')}]")
        err(f"{len(rows)} stored failure{'s' if len(rows) != 1 else ''} in {st.root}")
        for _, why in bad:
            err(f"corrupt: {why}")
        if bad:
            raise SnapshotError(f"{len(bad)} record{'s' if len(bad) != 1 else ''} in {st.root / 'failures'} "
                                "cannot be replayed (listed above as corrupt)")
        return 0
    if not args.seed:
        raise InvalidArgument("reproduce needs a SEED (as printed after 'replay:'), or --list")
    device = prepare_device(args.device)
    st = Store(config.resolve(store=args.store).store)
    found = st.find(args.seed, args.target)
    if isinstance(found.record.get("hook"), dict):  # a divergence the hook stored in training or canary traffic
        from .._hook_quiet import no_autoinstall

        with no_autoinstall():  # replaying needs the hook's code, not the hook installed
            from ..hook import replay_record

        record, tensors = st.fetch_found(found)
        hr = replay_record(record, tensors, device=None if args.device == "auto" else device,
                           recompile=args.recompile, trust=args.trust)
        err(hr.report())
        if args.json:
            write_json(args.json, {"record": record, "verdict": hr.verdict.to_dict(), "same": hr.same,
                                   "rerun": hr.rerun is not None, "how": hr.how})
        return 0 if hr.verdict.status == "pass" else 1
    if args.recompile:
        raise InvalidArgument(f"--recompile applies to hook graph records; {found.path.name} is a fuzz record")
    outside = _outside(found.target)
    if outside and not args.trust:
        raise SnapshotError(f"record {found.path.name} names {found.target}, a file outside this directory "
                            f"({outside}); replaying imports and runs it: check it, then pass --trust")
    from ..fuzzer import reproduce

    rp = reproduce(f"0x{found.seed:x}", store=args.store, target=found.target, device=device)
    recorded_on, now_on = _device_type(rp.record.get("device")), _device_type(device)
    moved = recorded_on is not None and recorded_on != now_on
    err(f"replayed {found.target} seed 0x{found.seed:x} from {found.path} (the launcher re-ran on the stored bytes"
        + (f", on {now_on}; the record was made on {recorded_on})" if moved else ")"))
    err(f"stored: {rp.record.get('line')}")
    err(rp.failure.line() if rp.verdict.status != "pass" else f"PASS seed=0x{rp.case.seed:x} (the stored failure no longer reproduces)")
    err(f"case: {rp.case.describe()}")
    if rp.verdict.detail:
        err("\n".join("  " + ln for ln in rp.verdict.detail.splitlines()))
    v, stored = rp.verdict, rp.stored
    if rp.same:
        err(f"reproduced: same verdict, max abs err {v.max_abs_err!r} bit for bit")
    elif moved and v.status == stored.status and v.kind == stored.kind:
        err(f"reproduced on {now_on}: same verdict ({v.status} {v.kind}), not bit for bit: max abs err "
            f"{v.max_abs_err!r} here, {stored.max_abs_err!r} on {recorded_on} (the devices' arithmetic differs)")
    else:
        err(f"NOT reproduced: now {v.status} {v.message!r}, stored {stored.status} {stored.message!r}")
        if moved:
            err(f"the verdict differs between devices: recorded on {recorded_on}, replayed on {now_on}; the kernel's "
                f"result depends on the device (dot precision, approximate math, FMA contraction, or a race). "
                f"Replay with --device {recorded_on} on such a machine to compare")
    if args.json:
        write_json(args.json, {"record": rp.record, "verdict": rp.verdict.to_dict(), "same": rp.same})
    return 0 if rp.verdict.status == "pass" else 1


def _device_type(device: object) -> str | None:
    """'cuda' for 'cuda:0' or torch.device('cuda', 0); None when the record names none."""
    if device is None:
        return None
    text = str(getattr(device, "type", device))
    return text.split(":", 1)[0] or None


def _outside(target: str) -> str | None:
    """The resolved file of a ``path.py:function`` target when it lies outside the working directory (a record
    copied from another machine can name any path); None for files inside it and for ``pkg.module`` targets."""
    import os
    from pathlib import Path

    mod = target.rpartition(":")[0]
    if not (mod.endswith(".py") or "/" in mod or os.sep in mod):
        return None
    path = Path(mod).resolve()
    return None if path.is_relative_to(Path.cwd().resolve()) else str(path)
