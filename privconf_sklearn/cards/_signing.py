"""Optional Ed25519 signatures of cards, through the ``cryptography`` package.

``formal_sha256`` is an unkeyed digest: it catches accidental edits, but whoever edits a
card can recompute it. A signature binds the formal layer to the issuer's key: only the
holder of the private key can produce one that verifies under the public key an auditor
obtained from the issuer.
"""

from __future__ import annotations

from typing import Any

from ._codec import canonical_bytes
from ._records import Signature

__all__ = ["check_signature", "public_key_hex", "sign_payload"]


def _ed25519():
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Signing cards needs the 'cryptography' package: pip install 'privconf_sklearn[sign]'."
        ) from exc
    return ed25519


def _raw(public_key) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def public_key_hex(public_key) -> str:
    """The raw Ed25519 public key as 64 hex digits.

    Parameters
    ----------
    public_key : Ed25519PublicKey or bytes
        A key object, its 32 raw bytes, or its PEM encoding.
    """
    ed25519 = _ed25519()
    if isinstance(public_key, ed25519.Ed25519PublicKey):
        return _raw(public_key).hex()
    if isinstance(public_key, bytes) and len(public_key) == 32:
        return public_key.hex()
    if isinstance(public_key, bytes | str):
        from cryptography.hazmat.primitives.serialization import load_pem_public_key

        text = public_key.encode() if isinstance(public_key, str) else public_key
        try:
            loaded = load_pem_public_key(text)
        except ValueError as exc:
            raise ValueError(f"public_key is not a PEM-encoded public key: {exc}") from exc
        if isinstance(loaded, ed25519.Ed25519PublicKey):
            return _raw(loaded).hex()
        raise ValueError(f"public_key must be an Ed25519 key; got {type(loaded).__name__}.")
    raise TypeError(
        "public_key must be an Ed25519PublicKey, its 32 raw bytes or its PEM encoding; "
        f"got {type(public_key).__name__}."
    )


def sign_payload(payload: Any, private_key) -> Signature:
    """Sign :func:`~._codec.canonical_bytes` of ``payload`` with an Ed25519 private key."""
    ed25519 = _ed25519()
    if not isinstance(private_key, ed25519.Ed25519PrivateKey):
        raise TypeError(
            f"private_key must be an Ed25519PrivateKey; got {type(private_key).__name__}."
        )
    value = private_key.sign(canonical_bytes(payload))
    return Signature("ed25519", _raw(private_key.public_key()).hex(), value.hex())


def check_signature(signature: Signature | None, payload: Any, expected: str) -> str | None:
    """None if ``signature`` signs ``payload`` under the key ``expected`` (hex, raw).

    Otherwise the problem, in words.
    """
    from cryptography.exceptions import InvalidSignature

    if signature is None:
        return "the card is not signed, but a public key was given to check it with."
    if signature.public_key != expected:
        return (
            f"the card is signed by key {signature.public_key[:16]}..., not by the given "
            f"key {expected[:16]}...."
        )
    key = _ed25519().Ed25519PublicKey.from_public_bytes(bytes.fromhex(expected))
    try:
        key.verify(bytes.fromhex(signature.value), canonical_bytes(payload))
    except InvalidSignature:
        return "the signature does not verify: the formal layer was changed after signing."
    return None
