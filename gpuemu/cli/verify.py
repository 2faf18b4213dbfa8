"""``gpuemu verify REPORT --key PUB [--sources DIR] [--require-pass]``: check a signed Kernel Correctness Report
offline. Without ``--require-pass`` it answers "is this report authentic (and are these its sources)?"; with it,
"is it authentic and did every launcher pass?", which is what a customer's own gate needs."""

from __future__ import annotations

from pathlib import Path

from ._common import err, write_json


def register(sub) -> None:
    p = sub.add_parser("verify", help="verify a signed Kernel Correctness Report offline",
                       description="Verify REPORT's ed25519 signature with the public key and, with --sources, "
                                   "that every kernel file, manifest and rule pack it names still has the signed "
                                   "sha256. Exit 0 verified, 1 not verified (or, with --require-pass, verified but "
                                   "a launcher did not pass), 2 usage error.")
    p.add_argument("report", metavar="REPORT", help="the DSSE envelope written by 'gpuemu check --attest'")
    p.add_argument("--key", required=True, metavar="PUB", help="the signer's ed25519 public key (PEM)")
    p.add_argument("--sources", metavar="DIR", default=None, help="project root to check the subjects' hashes against")
    p.add_argument("--require-pass", action="store_true",
                   help="also require that every launcher in the report passed (exit 1 otherwise): the policy a "
                        "gate on someone else's report needs; without it a report of failing verdicts verifies")
    p.add_argument("--json", metavar="PATH", default=None, help="write the verification as JSON ('-' for stdout)")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..errors import InvalidArgument
    from ..report.attest import unpassed, verify

    if args.json and args.json != "-":
        from ._common import check_writable

        check_writable(args.json, "--json")
    try:
        data = Path(args.report).read_bytes()
    except OSError as e:
        raise InvalidArgument(f"{args.report}: cannot read the report: {e.strerror or e}") from None
    v = verify(data, public_key_path=args.key, sources=args.sources)
    failing = unpassed(v.statement) if v.ok else []
    if args.json:
        write_json(args.json, dict(v.to_dict(), require_pass=args.require_pass, not_passed=failing,
                                   passed=v.ok and not failing))
    if not v.ok:
        for p in v.problems:
            err(f"FAIL {p}")
        err(f"NOT VERIFIED: {args.report}")
        return 1
    pred = v.statement["predicate"]
    s = pred["summary"]
    err(f"OK signature valid: ed25519 key {v.key_id[:16]}…")
    err(f"   gpuemu {pred['tool']['version']} · torch {pred['environment']['torch']} · triton "
        f"{pred['environment']['triton']} · device {pred['environment']['device']} · seed {pred['run']['seed']} · "
        f"{pred['run']['started']}")
    src, ci = pred.get("source") or {}, pred.get("ci") or {}
    if src:
        err(f"   commit {src.get('commit')}" + (" (with uncommitted changes to tracked files)" if src.get("dirty") else "")
            + (f" on {src['ref']}" if src.get("ref") else ""))
    if ci:
        err(f"   CI: {ci.get('run_url') or ci.get('provider')}" + (f" (attempt {ci['run_attempt']})"
                                                                   if ci.get("run_attempt") else ""))
    err(f"   {s['passed']}/{s['kernels']} kernels passed, {s['cases']} cases; verdicts {s['verdicts']}")
    if args.sources is not None:
        err(f"   {len(v.checked)} subject files match their signed sha256 under {args.sources}"
            + (f" ({len(v.unchecked)} not checked: {', '.join(v.unchecked)})" if v.unchecked else ""))
    else:
        err(f"   {len(v.statement['subject'])} subjects (pass --sources DIR to check their hashes)")
    err(f"VERIFIED: {args.report}")
    if args.require_pass and failing:
        err(f"NOT PASSED: {len(failing)} of {s['kernels']} launchers did not pass: {', '.join(failing)} "
            "(--require-pass)")
        return 1
    if args.require_pass:
        err(f"PASSED: every launcher of the report passed ({s['kernels']})")
    return 0
