"""Command line: ``python -m privconf_sklearn demo`` and ``... card show|verify card.json``.

``card show`` prints the card as Markdown (or JSON), marking every part its signature
does not cover; ``card verify`` prints the verification, the failed clauses with their
reasons when the contract is not met.

Exit codes: 0 success (``card verify``: the contract is met); 1 ``card verify``: the
contract is not met, or the card records none; 2 a usage error (bad option or value,
printed by argparse as one line), or ``card`` could not read the file (also a card of
an earlier format version, with the reason), or ``card verify`` found the card
inconsistent. A closed output pipe (``| head``) ends the output quietly.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

EPILOG = (
    "exit codes: 0 success / contract met; 1 contract not met or no contract (card "
    "verify); 2 usage error, unreadable or inconsistent card"
)


def _bounded_int(low: int, high: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in [{low}, {high}]")
        return value

    return parse


def _real(low: float, high: float):
    """A real number in ``[low, high]`` (never NaN)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is not in [{low:g}, {high:g}]")
        return value

    return parse


def _emit(text: str) -> None:
    """Print ``text``; if the reader closed the pipe, stop writing quietly."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at devnull so that the interpreter's final flush does not fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _print_line(text: str = "") -> None:
    _emit(f"{text}\n")


def _demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo

    run_demo(
        n_samples=args.n_samples,
        alpha=args.alpha,
        epsilon_model=args.epsilon_model,
        epsilon_cal=args.epsilon_cal,
        score=args.score,
        seed=args.seed,
        print_fn=_print_line,
    )
    return 0


def _load_card(path: str):
    """A contract card, or a risk card when the file names the risk-card schema."""
    from .cards import RISK_SCHEMA, CardFormatError, ContractCard, RiskCard

    try:
        return ContractCard.load(path)
    except CardFormatError as exc:
        if RISK_SCHEMA not in str(exc):
            raise
    return RiskCard.load(path)


def _card(args: argparse.Namespace) -> int:
    from .cards import verify_card

    key = None
    if args.public_key is not None:
        try:
            key = Path(args.public_key).read_bytes()
        except OSError as exc:
            print(f"error: cannot read the public key {args.public_key}: {exc}", file=sys.stderr)
            return 2
    if args.action == "verify":
        try:
            result = verify_card(Path(args.path), public_key=key)
        except (ImportError, TypeError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        _emit(result.report() + "\n")
        return result.exit_code
    try:
        card = _load_card(args.path)
    except (OSError, ValueError) as exc:
        print(f"error: cannot read {args.path}: {exc}", file=sys.stderr)
        return 2
    if card.compute_digest() != card.formal_sha256:
        print(
            "warning: formal_sha256 does not match the formal layer (edited card); run "
            "'card verify'.",
            file=sys.stderr,
        )
    _emit(card.to_json() if args.format == "json" else card.to_markdown())
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``privconf_sklearn`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m privconf_sklearn",
        description="Differentially private conformal prediction for scikit-learn.",
        epilog=EPILOG,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="train a diffprivlib model and calibrate it with every mechanism",
        epilog=EPILOG,
    )
    demo.add_argument("--n-samples", type=_bounded_int(1000, 10**6), default=10000)
    demo.add_argument("--alpha", type=_real(0.001, 0.999), default=0.1)
    demo.add_argument("--epsilon-model", type=_real(0.001, 1000.0), default=2.0)
    demo.add_argument("--epsilon-cal", type=_real(0.001, 1000.0), default=1.0)
    demo.add_argument("--score", choices=["lac", "aps", "aps_randomized", "raps"], default="lac")
    demo.add_argument(
        "--seed",
        type=_bounded_int(0, 2**32 - 1),
        default=None,
        help="seed the privacy noise (reproducible, not for production); default: OS entropy",
    )
    demo.set_defaults(handler=_demo)
    card = commands.add_parser(
        "card",
        help="show or verify a contract card (JSON); verify exits 0 if the contract is met, "
        "1 if not (or no contract), 2 if the card is unreadable or inconsistent",
        epilog=EPILOG,
    )
    card.add_argument("action", choices=["show", "verify"])
    card.add_argument("path", help="card JSON file (ContractCard.save)")
    card.add_argument("--format", choices=["markdown", "json"], default="markdown")
    card.add_argument(
        "--public-key",
        default=None,
        help="verify: the issuer's Ed25519 public key (PEM file); the card must be signed by it",
    )
    card.set_defaults(handler=_card)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m privconf_sklearn``; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except BrokenPipeError:  # pragma: no cover - a pipe closed outside _emit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
