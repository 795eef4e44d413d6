#!/usr/bin/env python3
"""Writes the seed corpus of the `transaction` target: signed transactions in the wire layout of
`executor/src/codec.rs` (a native transfer, a Move transfer, a zero-length script, and
workload calls: a kvstore entry call and a SmallBank payment through a script).

Python rather than a Rust test so that writing three seeds does not build the Move VM crates a
second time; the fuzz target itself checks the layout (every seed must decode and re-encode).
Run: python3 executor/fuzz/seeds.py
"""
import hashlib
import pathlib
import struct

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

DOMAIN = b"HotMove/transaction/v1\0"
ADDRESS_LEN = 16


def key(seed):
    secret = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(bytes([seed])).digest())
    public = secret.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return secret, public


def address(public):
    return hashlib.sha256(public).digest()[:ADDRESS_LEN]


def transaction(seed, nonce, destination, amount, script=None):
    secret, public = key(seed)
    fields = address(public) + public + struct.pack("<Q", nonce)
    if script is None:
        fields += struct.pack("<I", 0) + destination + struct.pack("<Q", amount)
    else:
        fields += struct.pack("<IQ", 1, len(script)) + script
        fields += destination + struct.pack("<Q", amount)
    return fields + secret.sign(DOMAIN + fields)


def call_transaction(seed, nonce, payload):
    """A workload call: `payload` is the payload tag and what follows it (codec.rs)."""
    secret, public = key(seed)
    fields = address(public) + public + struct.pack("<Q", nonce) + payload
    return fields + secret.sign(DOMAIN + fields)


def main():
    out = pathlib.Path(__file__).resolve().parent / "corpus" / "transaction"
    out.mkdir(parents=True, exist_ok=True)
    destination = address(key(2)[1])
    # Not the compiled transfer script, just bytes of its size: decoding treats them as opaque.
    script = bytes(range(150))
    seeds = {
        "native": transaction(1, 0, destination, 42),
        "move": transaction(1, 7, destination, 5, script),
        "move-empty-script": transaction(3, 1, destination, 0, b""),
        # Entry call (tag 4) of KvStore (call 2): first key, keys, value size, version.
        "kvstore-entry": call_transaction(4, 2, struct.pack("<IIQQQQ", 4, 2, 8, 4, 32, 2)),
        # Script (tag 3) of SmallBank (call 3) SendPayment (procedure 3): to, amount.
        "smallbank-script": call_transaction(
            5,
            3,
            struct.pack("<IQ", 3, len(script))
            + script
            + struct.pack("<II", 3, 3)
            + destination
            + struct.pack("<Q", 7),
        ),
    }
    for name, tx in seeds.items():
        (out / f"seed-{name}").write_bytes(tx)


if __name__ == "__main__":
    main()
