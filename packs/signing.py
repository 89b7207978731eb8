"""Signed packs: a detached Ed25519 signature over a build's manifest.

The manifest holds the sha256 of every other file of the build (packs/integrity.py), so
one signature over its exact bytes vouches for the whole build. `kpack keygen` writes a
key pair (PEM: PKCS#8 private key, SubjectPublicKeyInfo public key; OpenSSH ed25519 keys
are read too), `kpack pack --sign KEY` puts `manifest.sig` next to the manifest in the
archive, and `kpack install --trust PUBKEY` / `KnowledgePack.open(..., trust=...)` refuse
a build that is unsigned or signed by any other key.

`manifest.sig` is a small JSON object: {"scheme": "ed25519", "key_id": the first 16 hex
digits of the sha256 of the raw public key, "signature": base64 of the 64-byte signature
of manifest.json's bytes}, so `openssl pkeyutl -verify -rawin` checks it too.

Threat model. A signature answers "did the holder of this key publish exactly this
build?": it catches a pack changed anywhere after signing (a mirror, a shared folder, an
archive whose files, manifest and .sha256 were all rewritten) and a pack re-signed with
another key. It does not stop a thief of the private key, a rollback to an older build
signed with the same key (compare `built_at`), a public key obtained from the attacker
(get it out of band), or readers that do not pass `trust`.

The signing key may be encrypted with a passphrase from $KPACK_SIGNING_PASSPHRASE.
Errors are `SignatureError` (a PackFormatError: exit 2 at the CLI), one line each.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Union

from packs import format as fmt
from packs.manifest import Manifest, manifest_bytes, parse_manifest

# cryptography is imported where a key is used: opening a pack without `trust` (the common
# case) should not pay its import (about 0.1 s).
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

SCHEME = "ed25519"
PASSPHRASE_ENV = "KPACK_SIGNING_PASSPHRASE"
MAX_KEY_BYTES = 16 * 1024
MAX_SIGNATURE_BYTES = 4096

PublicKey = Union[str, os.PathLike, "Ed25519PublicKey"]  # noqa: UP007 (a string member)
Trust = Union[PublicKey, Sequence[PublicKey]]  # noqa: UP007


class SignatureError(fmt.PackFormatError):
    """A signature is missing, malformed or not from a trusted key, or a key is unusable."""


# --- keys --------------------------------------------------------------------------------


def key_id(public: Ed25519PublicKey) -> str:
    """A short name for a public key: the first 16 hex digits of its raw bytes' sha256."""
    from cryptography.hazmat.primitives import serialization

    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def generate_keypair(private_path: Path, public_path: Path | None = None) -> tuple[Path, Path, str]:
    """Write a new Ed25519 key pair: `private_path` (PEM PKCS#8, mode 0600, encrypted when
    $KPACK_SIGNING_PASSPHRASE is set) and `public_path` (default `<private>.pub`). Returns
    (private path, public path, key id). FileExistsError rather than overwrite a key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    public_path = public_path or private_path.with_name(private_path.name + ".pub")
    for path in (private_path, public_path):
        if path.exists():
            raise FileExistsError(f"{path} exists; move it away or choose another name")
    key = Ed25519PrivateKey.generate()
    passphrase = os.environ.get(PASSPHRASE_ENV)
    encryption = (serialization.BestAvailableEncryption(passphrase.encode()) if passphrase
                  else serialization.NoEncryption())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            encryption)
    private_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    public = key.public_key()
    public_path.write_bytes(public.public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo))
    return private_path, public_path, key_id(public)


def _read_key_file(path: Path, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise SignatureError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from exc
    if len(data) > MAX_KEY_BYTES:
        raise SignatureError(f"{path}: too large for a {what}")
    return data


def load_private_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM (PKCS#8) or OpenSSH file; SignatureError names
    what is wrong (not a key, another algorithm, a wrong or missing passphrase)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = Path(path).expanduser()
    data = _read_key_file(path, "private key")
    passphrase = os.environ.get(PASSPHRASE_ENV)
    password = passphrase.encode() if passphrase else None
    try:
        if data.lstrip().startswith(b"-----BEGIN OPENSSH PRIVATE KEY"):
            key = serialization.load_ssh_private_key(data, password)
        else:
            key = serialization.load_pem_private_key(data, password)
    except (ValueError, TypeError) as exc:
        raise SignatureError(f"{path}: not a usable private key ({exc}); make one with "
                             f"kpack keygen (set ${PASSPHRASE_ENV} for an encrypted key)"
                             ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError(f"{path}: not an Ed25519 key; make one with kpack keygen")
    return key


def load_public_key(source: PublicKey) -> Ed25519PublicKey:
    """An Ed25519 public key: a key object, or a PEM or OpenSSH (`ssh-ed25519 ...`) file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if isinstance(source, Ed25519PublicKey):
        return source
    path = Path(source).expanduser()
    data = _read_key_file(path, "public key")
    try:
        if data.lstrip().startswith(b"ssh-"):
            key = serialization.load_ssh_public_key(data.strip())
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise SignatureError(f"{path}: not a public key ({exc}); pass the .pub file "
                             "kpack keygen wrote") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise SignatureError(f"{path}: not an Ed25519 public key")
    return key


def trusted_keys(trust: Trust) -> list[Ed25519PublicKey]:
    """The keys of `trust` (one key or file, or a sequence); SignatureError when empty."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    items = [trust] if isinstance(trust, (str, os.PathLike, Ed25519PublicKey)) else list(trust)
    if not items:
        raise SignatureError("trust names no public key; pass the signer's .pub file")
    return [load_public_key(k) for k in items]


# --- signatures ----------------------------------------------------------------------------


def sign(manifest: bytes, key: Ed25519PrivateKey) -> bytes:
    """The contents of manifest.sig for these manifest bytes."""
    record = {"scheme": SCHEME, "key_id": key_id(key.public_key()),
              "signature": base64.b64encode(key.sign(manifest)).decode("ascii")}
    return (json.dumps(record, indent=1) + "\n").encode("utf-8")


def read_signature(build_dir: Path) -> dict | None:
    """The build's manifest.sig as {"scheme", "key_id", "signature" (bytes)}, None when it
    has none; SignatureError when it is malformed."""
    path = build_dir / fmt.SIGNATURE_FILE
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as f:
            record = json.loads(f.read(MAX_SIGNATURE_BYTES + 1)[:MAX_SIGNATURE_BYTES])
        signature = base64.b64decode(record["signature"], validate=True)
        if record.get("scheme") != SCHEME or len(signature) != 64:
            raise ValueError(f"scheme {record.get('scheme')!r}, {len(signature)} bytes")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SignatureError(f"{path}: not a valid {SCHEME} signature ({exc}); the pack was "
                             "damaged or tampered with: reinstall it") from exc
    return {"scheme": SCHEME, "key_id": str(record.get("key_id", "?"))[:64],
            "signature": signature}


def check(build_dir: Path, manifest: bytes, trust: Trust) -> str:
    """Check that `manifest` (the build's manifest.json bytes) is signed by a key of
    `trust`; returns that key's id. SignatureError: unsigned, malformed, or not signed by
    a trusted key (tampered after signing, or signed by someone else)."""
    from cryptography.exceptions import InvalidSignature

    keys = trusted_keys(trust)
    record = read_signature(build_dir)
    if record is None:
        raise SignatureError(f"{build_dir}: the pack is not signed ({fmt.SIGNATURE_FILE} is "
                             "missing) and a trusted key was asked for; install a signed "
                             "archive (kpack pack --sign KEY)")
    for key in keys:
        try:
            key.verify(record["signature"], manifest)
        except InvalidSignature:
            continue
        return key_id(key)
    names = ", ".join(key_id(k) for k in keys)
    raise SignatureError(f"{build_dir}: the manifest's signature (key {record['key_id']}) does "
                         f"not verify with the trusted key(s) {names}: the pack was changed "
                         "after signing or signed by someone else; do not use it")


def signature_status(build_dir: Path, checked: bool) -> dict | None:
    """{"key_id": the key the signature names, "checked": whether it was checked against
    trusted keys} for a signed build; None for an unsigned one. A malformed signature
    that was not checked names key "?"."""
    try:
        record = read_signature(build_dir)
    except SignatureError:
        return {"key_id": "?", "checked": False}
    return {"key_id": record["key_id"], "checked": checked} if record else None


def unchecked_note(build_dir: Path, status: dict) -> str:
    """What a reader should know about a signature it did not check, in one line."""
    return (f"{build_dir}: signed by key {status['key_id']}, not checked (pass --trust "
            "with the signer's public key, or trust= in Python, to check it)")


def read_trusted_manifest(build_dir: Path, trust: Trust) -> Manifest:
    """The manifest of `build_dir`, parsed from the very bytes whose signature was checked
    against `trust` (so nothing can swap the file in between)."""
    raw = manifest_bytes(build_dir)
    check(build_dir, raw, trust)
    return parse_manifest(raw, build_dir)
