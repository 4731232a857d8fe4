"""Optional Ed25519 signatures of cards, through the ``cryptography`` package.

A card's editor can recompute its unkeyed ``formal_sha256``, but not the issuer's signature,
which covers the whole published card (``ContractCard.signed_payload``).
"""

from __future__ import annotations

from ._codec import canonical_bytes
from ._records import Signature

__all__ = ["check_signature", "public_key_hex", "sign_payload"]


def _ed25519():
    """``cryptography``'s Ed25519 module, imported on first use (an optional extra)."""
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Signing cards needs the 'cryptography' package: pip install 'privconf_sklearn[sign]'."
        ) from exc
    return ed25519


def public_key_hex(public_key) -> str:
    """An Ed25519PublicKey, its 32 raw bytes or its PEM encoding as 64 hex digits."""
    ed25519 = _ed25519()
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    if isinstance(public_key, bytes) and len(public_key) == 32:
        return public_key.hex()
    if isinstance(public_key, bytes | str):
        text = public_key.encode() if isinstance(public_key, str) else public_key
        try:
            public_key = load_pem_public_key(text)
        except ValueError as exc:
            raise ValueError(f"public_key is not a PEM-encoded public key: {exc}") from exc
        if not isinstance(public_key, ed25519.Ed25519PublicKey):
            raise ValueError(f"public_key must be an Ed25519 key; got {type(public_key).__name__}.")
    if isinstance(public_key, ed25519.Ed25519PublicKey):
        return public_key.public_bytes_raw().hex()
    kind = type(public_key).__name__
    raise TypeError(f"public_key must be an Ed25519PublicKey, its 32 raw bytes or PEM; got {kind}.")


def sign_payload(payload: object, private_key) -> Signature:
    """Sign :func:`~._codec.canonical_bytes` of ``payload`` with an Ed25519 private key."""
    ed25519 = _ed25519()
    if not isinstance(private_key, ed25519.Ed25519PrivateKey):
        kind = type(private_key).__name__
        raise TypeError(f"private_key must be an Ed25519PrivateKey; got {kind}.")
    signed = private_key.sign(canonical_bytes(payload))
    return Signature("ed25519", public_key_hex(private_key.public_key()), signed.hex())


def check_signature(signature: Signature | None, payload: object, expected: str) -> str | None:
    """None if ``signature`` signs ``payload`` under the raw hex key ``expected``, else why not."""
    if signature is None:
        return "the card is not signed, but a public key was given to check it with."
    if signature.public_key != expected:
        given = f"not by the given key {expected[:16]}...."
        return f"the card is signed by key {signature.public_key[:16]}..., {given}"
    from cryptography.exceptions import InvalidSignature

    key = _ed25519().Ed25519PublicKey.from_public_bytes(bytes.fromhex(expected))
    try:
        key.verify(bytes.fromhex(signature.value), canonical_bytes(payload))
    except InvalidSignature:
        return (
            "the signature does not verify: the card (its formal or diagnostic layer) was "
            "changed after signing."
        )
    return None
