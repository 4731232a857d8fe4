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
from ._codec import MAX_CHARS, CardFormatError, canonical_bytes, decode, dumps, loads, plain_value
from ._records import EMPIRICAL, Diagnostics, decode_field, json_object, schema_of, to_plain

__all__ = ["OwnerDiagnosticsWarning", "PublishedCard"]


#: JSON paths of the card fields outside ``formal.<name>``.
_PATHS = {
    "training_privacy": "formal.privacy.training",
    "calibration_privacy": "formal.privacy.calibration",
    "diagnostics": "diagnostics",
    "owner_diagnostics": "owner_diagnostics",
    "signature": "signature",
    "formal_sha256": "formal_sha256",
}
#: The formal layer's entries every card has, in schema order.
FORMAL_NAMES = ("contract", "configuration", "privacy", "calibrations", "clauses", "decision")


class OwnerDiagnosticsWarning(UserWarning):
    """Owner diagnostics (not covered by the privacy guarantee) are being written out."""


class PublishedCard:
    """The published form of a card (a base class of frozen card records).

    Subclasses set :attr:`schema` and :attr:`schema_version` (and
    :attr:`extra_formal_names`), and define ``_render_markdown(owner)``; their records
    have the fields of the formal layer (``contract``, ``configuration``,
    ``training_privacy``, ``calibration_privacy``, ``calibrations``, ``clauses``,
    ``decision`` and the extra names), ``diagnostics``, ``owner_diagnostics``,
    ``signature`` and ``formal_sha256``.
    """

    #: Schema name and version written in every serialised card of the class.
    schema: ClassVar[str]
    schema_version: ClassVar[int]
    #: Whether an unsigned card writes ``"signature": null`` (a kind of card whose first
    #: schema had no signature writes the key only when signed, so that readers of that
    #: schema still read its unsigned cards).
    writes_unsigned_signature: ClassVar[bool] = True

    #: Formal entries of this kind of card beyond :data:`FORMAL_NAMES`.
    extra_formal_names: ClassVar[tuple[str, ...]] = ()

    #: The empirical diagnostics :meth:`evaluate` measures, in the order cards show them.
    empirical_names: ClassVar[tuple[str, ...]] = EMPIRICAL

    # Fields of the card records (declared by the dataclasses that derive from this).
    contract: Any
    configuration: Any
    training_privacy: Any
    calibration_privacy: Any
    calibrations: Any
    clauses: Any
    decision: str
    diagnostics: Any
    owner_diagnostics: Any
    signature: Any
    formal_sha256: str
    _estimator: Any  # the fitted estimator a card was built from (never serialised)

    def formal_dict(self) -> dict:
        """The formal layer as plain data."""
        return {
            "contract": to_plain(self.contract),
            "configuration": to_plain(self.configuration),
            "privacy": {
                "training": to_plain(self.training_privacy),
                "calibration": to_plain(self.calibration_privacy),
            },
            "calibrations": to_plain(self.calibrations),
            "clauses": to_plain(self.clauses),
            "decision": self.decision,
            **{name: to_plain(getattr(self, name)) for name in self.extra_formal_names},
        }

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
    def _check_schema(cls, schema: Any, version: Any) -> None:
        """CardFormatError unless the card is of this class's schema and version."""
        if (schema, version) != (cls.schema, cls.schema_version) or type(version) is not int:
            raise CardFormatError(
                f"card: schema {schema!r} version {version!r} is not {cls.schema!r} version "
                f"{cls.schema_version}."
            )

    @classmethod
    def from_dict(cls, data: Any) -> Any:
        """Inverse of :meth:`to_dict`; also takes ``json.loads`` output.

        Raises
        ------
        CardFormatError
            If the schema name or version is not this class's, or a field is missing,
            unknown or invalid (the message names its JSON path).
        """
        required = ("schema", "schema_version", "formal", "formal_sha256")
        data = json_object(
            decode(data), "card", required, ("signature", "diagnostics", "owner_diagnostics")
        )
        cls._check_schema(data["schema"], data["schema_version"])
        formal = json_object(data["formal"], "formal", (*FORMAL_NAMES, *cls.extra_formal_names))
        privacy = json_object(formal.pop("privacy"), "formal.privacy", ("training", "calibration"))
        values = {
            **formal,
            "training_privacy": privacy["training"],
            "calibration_privacy": privacy["calibration"],
            "diagnostics": Diagnostics()
            if data.get("diagnostics") is None
            else data["diagnostics"],
            "owner_diagnostics": data.get("owner_diagnostics", {}),
            "signature": data.get("signature"),
            "formal_sha256": data["formal_sha256"],
        }
        schema = schema_of(cls)
        try:
            return cls(
                **{
                    name: decode_field(
                        schema[name], values[name], _PATHS.get(name, f"formal.{name}")
                    )
                    for name in schema
                }
            )
        except CardFormatError:
            raise
        except (TypeError, ValueError) as exc:
            raise CardFormatError(f"card: {exc}") from exc

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

    def _attached(self, card: Any) -> Any:
        """``card`` with this card's estimator attached (for :meth:`evaluate`)."""
        object.__setattr__(card, "_estimator", self._estimator)
        return card

    def _with_signature(self, signature) -> Any:
        """A copy carrying ``signature``, with the estimator this card was built from.

        The copy has its own diagnostic layer and owner diagnostics: evaluating the
        original afterwards leaves the signed copy (and its signature) as signed.
        """
        copy = dataclasses.replace(
            self,  # type: ignore[type-var]
            signature=signature,
            diagnostics=dataclasses.replace(self.diagnostics),
            owner_diagnostics=dict(self.owner_diagnostics),
        )
        return self._attached(copy)

    def _check_evaluated(self, estimator) -> None:
        """Raise unless ``estimator`` is the fitted calibration this card records."""
        raise NotImplementedError

    def _empirical_diagnostics(self, estimator, X, y) -> dict[str, Any]:
        """The :attr:`empirical_names` measured on ``(X, y)``."""
        raise NotImplementedError

    def evaluate(self, X, y, *, estimator=None, public: bool = False) -> Any:
        """Compute the empirical diagnostics on held-out data, in place.

        Coverage cards: coverage, mean set size, singleton rate and the model's accuracy
        (classification), coverage and mean interval width (regression). Risk cards: the
        mean loss of the sets
        (:meth:`~privconf_sklearn.PrivateRiskControlClassifier.mean_loss`) and their mean
        size.
        They disclose nothing about the calibration set beyond the private thresholds,
        but they disclose the test data: they are owner diagnostics
        (``owner_diagnostics["test"]``) unless the test data are public (``public=True``:
        published in :attr:`diagnostics`).

        Parameters
        ----------
        X, y : array-like of shape (n_samples, n_features) and (n_samples,)
            Test features and targets (never the calibration rows); a 2-d indicator ``y``
            for a multilabel risk control.
        estimator : fitted estimator, default=None
            Needed only for a card read from JSON; must be the calibration the card
            records (same thresholds and calibration sizes).
        public : bool, default=False
            Whether ``(X, y)`` are public, so their diagnostics may be published.

        Returns
        -------
        ContractCard or RiskCard
            This card.

        Raises
        ------
        ValueError
            If the card is signed (its signature covers the diagnostics), has no
            estimator attached and none is given, or ``estimator`` is not the calibration
            the card records.
        """
        owner = f"{type(self).__name__}.evaluate"
        validate_params({"public": ["boolean"]}, {"public": public}, owner)
        if self.signature is not None:
            raise ValueError(
                "This card is signed, and its signature covers the diagnostic layer: "
                "evaluate the card before signing it."
            )
        estimator = self._estimator if estimator is None else estimator
        if estimator is None:
            raise ValueError(
                "This card has no estimator attached (it was read from JSON or built "
                "from a bare calibration); pass estimator= to evaluate it."
            )
        self._check_evaluated(estimator)
        found = self._empirical_diagnostics(estimator, X, y)
        if not public:
            self.owner_diagnostics["test"] = found
        for name, value in found.items() if public else ():
            setattr(self.diagnostics, name, value)
        return self

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
