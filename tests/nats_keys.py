"""NATS nkeys and JWTs minted by the tests, as nsc would make them: an operator, an account
it signs, and a user the account signs, for a nats-server in operator mode."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path

import nkeys


def keypair(prefix: int) -> tuple[bytes, str]:
    """A new nkey of the given kind: its seed and its public key."""
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    return seed, nkeys.from_seed(bytearray(seed)).public_key.decode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(issuer: bytes, subject: str, name: str, nats: dict) -> str:
    """A NATS JWT (version 2) of subject, signed by the issuer's seed."""
    signer = nkeys.from_seed(bytearray(issuer))
    claims = {"jti": _b64(os.urandom(24)), "iat": int(time.time()), "name": name,
              "iss": signer.public_key.decode(), "sub": subject, "nats": {**nats, "version": 2}}
    head = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps(claims).encode())
    return f"{head}.{body}.{_b64(signer.sign(f'{head}.{body}'.encode()))}"


UNLIMITED = {"subs": -1, "data": -1, "payload": -1}


def operator_mode(directory: Path) -> tuple[str, Path]:
    """A server configuration in operator mode with one account preloaded, and the path of a
    credentials file for a user of that account."""
    operator, operator_pub = keypair(nkeys.PREFIX_BYTE_OPERATOR)
    account, account_pub = keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    user, user_pub = keypair(nkeys.PREFIX_BYTE_USER)
    operator_jwt = jwt(operator, operator_pub, "harness-operator", {"type": "operator"})
    account_jwt = jwt(operator, account_pub, "harness-account", {
        "type": "account", "limits": {**UNLIMITED, "imports": -1, "exports": -1,
                                      "wildcards": True, "conn": -1, "leaf": -1}})
    user_jwt = jwt(account, user_pub, "harness-user", {"type": "user", **UNLIMITED,
                                                       "pub": {}, "sub": {}})
    creds = directory / "user.creds"
    creds.write_text(f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER "
                     f"JWT------\n\n-----BEGIN USER NKEY SEED-----\n{user.decode()}\n"
                     "------END USER NKEY SEED------\n")
    creds.chmod(0o600)
    conf = (f"operator: {operator_jwt}\nresolver: MEMORY\n"
            f"resolver_preload: {{ {account_pub}: {account_jwt} }}\n")
    return conf, creds
