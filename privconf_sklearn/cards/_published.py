"""What every card shares once it is published: digest, signature, JSON, files, Markdown.

A card (:class:`~._card.ContractCard`, :class:`~._risk_card.RiskCard`) is a frozen
record with a formal layer (its class's ``formal_dict``), published ``diagnostics``,
``owner_diagnostics`` written only on request, an optional Ed25519 ``signature`` and the
SHA-256 ``formal_sha256`` of its formal layer under its schema header. This base class
holds the rules that are the same for every kind of card: what the digest and the
signature cover, how owner diagnostics are written out, and the JSON and file round trip.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any, ClassVar

from .._param_validation import validate_params
from .._warnings import warn_at_caller
from ._codec import MAX_CHARS, canonical_bytes, dumps, loads, plain_value
from ._records import to_plain

__all__ = ["OwnerDiagnosticsWarning", "PublishedCard"]


class OwnerDiagnosticsWarning(UserWarning):
    """Owner diagnostics (not covered by the privacy guarantee) are being written out."""


class PublishedCard:
    """The published form of a card (a base class of frozen card records).

    Subclasses set :attr:`schema` and :attr:`schema_version`, and define
    ``formal_dict()``, ``from_dict()`` and ``_render_markdown(owner)``; their records
    have the fields ``diagnostics``, ``owner_diagnostics``, ``signature`` and
    ``formal_sha256``.
    """

    #: Schema name and version written in every serialised card of the class.
    schema: ClassVar[str]
    schema_version: ClassVar[int]
    #: Whether an unsigned card writes ``"signature": null`` (a kind of card whose first
    #: schema had no signature writes the key only when signed, so that readers of that
    #: schema still read its unsigned cards).
    writes_unsigned_signature: ClassVar[bool] = True

    # Fields of the card records (declared by the dataclasses that derive from this).
    diagnostics: Any
    owner_diagnostics: Any
    signature: Any
    formal_sha256: str

    def formal_dict(self) -> dict:
        """The formal layer as plain data."""
        raise NotImplementedError

    def digest_payload(self) -> dict:
        """Schema header and formal layer: what ``formal_sha256`` covers."""
        return {
            "schema": self.schema,
            "schema_version": self.schema_version,
            "formal": self.formal_dict(),
        }

    def signed_payload(self) -> dict:
        """What the signature covers: the published card but its digest and signature.

        The schema header, the formal layer and the diagnostic layer. Owner diagnostics
        (written only on request) are outside it.
        """
        return {**self.digest_payload(), "diagnostics": to_plain(self.diagnostics)}

    def compute_digest(self) -> str:
        """SHA-256 of the key-sorted, compact, ASCII JSON of :meth:`digest_payload`."""
        return hashlib.sha256(canonical_bytes(self.digest_payload())).hexdigest()

    def _owner_output(self, include_owner_diagnostics: bool) -> Any:
        """The owner diagnostics to write (with the warning), or None."""
        validate_params(
            {"include_owner_diagnostics": ["boolean"]},
            {"include_owner_diagnostics": include_owner_diagnostics},
            type(self).__name__,
        )
        owner = self.owner_diagnostics
        if not (include_owner_diagnostics and owner):
            return None
        warn_at_caller(
            "Writing owner diagnostics: computed from the data without noise, they are NOT "
            "covered by the privacy guarantee. Do not publish this output.",
            OwnerDiagnosticsWarning,
        )
        return plain_value(owner)

    def to_dict(self, *, include_owner_diagnostics: bool = False) -> dict:
        """The card as plain data, in schema order (see :meth:`to_json`)."""
        owner = self._owner_output(include_owner_diagnostics)
        data = {**self.digest_payload(), "formal_sha256": self.formal_sha256}
        if self.signature is not None or self.writes_unsigned_signature:
            data["signature"] = to_plain(self.signature)
        data["diagnostics"] = to_plain(self.diagnostics)
        if owner is not None:
            data["owner_diagnostics"] = owner
        return data

    def to_json(self, *, include_owner_diagnostics: bool = False) -> str:
        """JSON text, publishable by default (infinities as ``{"$float": "inf"}``).

        Parameters
        ----------
        include_owner_diagnostics : bool, default=False
            Also write the owner diagnostics, with an :class:`OwnerDiagnosticsWarning`:
            for the data owner's own records only.

        Returns
        -------
        str
        """
        return dumps(self.to_dict(include_owner_diagnostics=include_owner_diagnostics))

    def save(self, path: str | os.PathLike, *, include_owner_diagnostics: bool = False) -> None:
        """Write :meth:`to_json` to ``path`` (UTF-8); publishable by default."""
        text = self.to_json(include_owner_diagnostics=include_owner_diagnostics)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)

    @classmethod
    def from_dict(cls, data: Any) -> Any:
        """Inverse of :meth:`to_dict`; also takes ``json.loads`` output."""
        raise NotImplementedError

    @classmethod
    def from_json(cls, text: str | bytes) -> Any:
        """Read a card from JSON text (the errors are those of ``from_dict``)."""
        return cls.from_dict(loads(text))

    @classmethod
    def load(cls, path: str | os.PathLike) -> Any:
        """Read a card from a JSON file (at most 16 MiB)."""
        with open(path, encoding="utf-8") as handle:
            return cls.from_json(handle.read(MAX_CHARS + 1))

    def _render_markdown(self, owner_diagnostics: Any) -> str:
        raise NotImplementedError

    def to_markdown(self, *, include_owner_diagnostics: bool = False) -> str:
        """The card as Markdown (``include_owner_diagnostics`` as in :meth:`to_json`)."""
        return self._render_markdown(self._owner_output(include_owner_diagnostics))

    def _with_signature(self, signature) -> Any:
        """A copy carrying ``signature`` (the record is otherwise unchanged)."""
        return dataclasses.replace(self, signature=signature)  # type: ignore[type-var]

    def sign(self, private_key) -> Any:
        """A copy carrying an Ed25519 signature of the whole published card.

        The signature covers :meth:`signed_payload`: the schema header, the formal layer
        and the diagnostic layer. The digest ``formal_sha256`` protects the formal layer
        against accidental edits only: whoever edits a card can recompute it. Only the
        holder of ``private_key`` can make a signature that verifies under the matching
        public key (``verify_card(card, public_key=...)``). Owner diagnostics are never
        signed. Needs ``cryptography`` (``pip install "privconf_sklearn[sign]"``). Sign a
        contract card after :meth:`~privconf_sklearn.cards.ContractCard.evaluate`, which
        refuses a signed card.

        Parameters
        ----------
        private_key : cryptography...ed25519.Ed25519PrivateKey
            The issuer's key.

        Returns
        -------
        ContractCard or RiskCard
            A signed copy of this card.
        """
        from ._signing import sign_payload

        return self._with_signature(sign_payload(self.signed_payload(), private_key))
