"""``gpuemu keygen PREFIX``: an ed25519 key pair for signed Kernel Correctness Reports."""

from __future__ import annotations

from ._common import err


def register(sub) -> None:
    p = sub.add_parser("keygen", help="create an ed25519 key pair for 'gpuemu check --attest'",
                       description="Write PREFIX.key (private, PKCS#8 PEM, mode 0600) and PREFIX.pub (public PEM).")
    p.add_argument("prefix", metavar="PREFIX", nargs="?", default="gpuemu-signing",
                   help="file name prefix (default: gpuemu-signing)")
    p.add_argument("--force", action="store_true", help="overwrite existing key files")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..report.attest import _load_public, _raw, key_id, keygen

    priv, pub = keygen(args.prefix, force=args.force)
    err(f"private key: {priv} (keep it secret: it signs reports)")
    err(f"public key:  {pub} (give it to whoever verifies: gpuemu verify REPORT --key {pub})")
    err(f"key id:      {key_id(_raw(_load_public(pub)))}")
    return 0
