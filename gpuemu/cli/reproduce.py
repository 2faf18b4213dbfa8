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
    p.add_argument("--store", metavar="DIR", default=None,
                   help="failure store: a folder, or the zip of one (the gpuemu-store artifact a CI run uploaded) "
                        "(default: .gpuemu, or GPUEMU_STORE)")
    p.add_argument("--target", default=None, help="pick among records of several targets with the same seed")
    p.add_argument("--list", action="store_true", help="list the stored failures (and any corrupt records)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--trust", action="store_true",
                   help="hook records: import the module the record names and re-run the call (importing runs "
                        "that module's code; without it only the recorded output is re-judged); fuzz records: "
                        "allow a target file that is not this user's own code (outside this directory and its git "
                        "checkout, and not written here by this user: see gpuemu.origin)")
    p.add_argument("--recompile", action="store_true", help="hook graph records: compile the stored graph again here")
    p.add_argument("--json", metavar="PATH", default=None, help="write the replay as JSON ('-' for stdout)")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..runners.cuda_on_cpu import cuda_on_cpu

    with cuda_on_cpu():  # (a machine without CUDA: the launcher's CUDA host calls answered on the CPU)
        return _run(args)


def _run(args) -> int:
    from .. import config
    from ..errors import InvalidArgument, SnapshotError
    from ..store import Store

    if args.json and args.json != "-":
        check_writable(args.json, "--json")
    if args.store and str(args.store).endswith(".zip"):
        args.store = _unzipped(args.store)
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
    from ..origin import needs_trust, replaying, resolve
    from ..target import load

    where = resolve(found.target, found.record.get("origin"), st.root)
    why = needs_trust(where, found.record.get("origin"))
    if why and not args.trust:
        raise SnapshotError(f"record {found.path.name} names {found.target}: {why}")
    from ..fuzzer import reproduce

    with replaying():  # (a script that calls gpuemu.fuzz at import does not fuzz again)
        fn = load(where)
    rp = reproduce(f"0x{found.seed:x}", store=args.store, target=found.target, device=device, fn=fn)
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
    agree, line = rp.agreement(device)
    err(f"agreement: {line}")
    if args.json:
        write_json(args.json, {"record": rp.record, "verdict": rp.verdict.to_dict(), "same": rp.same,
                               "recorded_on": recorded_on, "replayed_on": now_on, "agree": agree})
    return 0 if rp.verdict.status == "pass" else 1


def _device_type(device: object) -> str | None:
    """'cuda' for 'cuda:0' or torch.device('cuda', 0); None when the record names none."""
    if device is None:
        return None
    text = str(getattr(device, "type", device))
    return text.split(":", 1)[0] or None


def _unzipped(path: str) -> str:
    """A store shipped as a zip (the Action's gpuemu-store artifact): extracted into a temporary folder (members
    outside it refused); its root is the folder holding ``failures/``."""
    import atexit
    import shutil
    import tempfile
    import zipfile
    from pathlib import Path

    from ..errors import InvalidArgument

    if not Path(path).is_file():
        raise InvalidArgument(f"--store {path}: no such file")
    dest = Path(tempfile.mkdtemp(prefix="gpuemu-store-"))
    atexit.register(shutil.rmtree, dest, ignore_errors=True)
    try:
        with zipfile.ZipFile(path) as z:
            for m in z.namelist():
                if m.startswith("/") or ".." in Path(m).parts:
                    raise InvalidArgument(f"--store {path}: member {m!r} points outside the archive; not extracted")
            z.extractall(dest)
    except zipfile.BadZipFile:
        raise InvalidArgument(f"--store {path} is not a zip file: give the store folder or its zip") from None
    found = next((p.parent for p in sorted(dest.rglob("failures")) if p.is_dir()), None)
    if found is None:
        raise InvalidArgument(f"--store {path}: the archive holds no failures/ folder (not a gpuemu store)")
    return str(found)
