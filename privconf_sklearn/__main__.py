"""Command line: ``python -m privconf_sklearn demo`` and ``... card show|verify card.json``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo

    run_demo(
        n_samples=args.n_samples,
        alpha=args.alpha,
        epsilon_model=args.epsilon_model,
        epsilon_cal=args.epsilon_cal,
        score=args.score,
        seed=args.seed,
    )
    return 0


def _card(args: argparse.Namespace) -> int:
    from .cards import ContractCard, verify_card

    if args.action == "verify":
        result = verify_card(Path(args.path))
        print(result.report())
        return result.exit_code
    try:
        card = ContractCard.load(args.path)
    except (OSError, ValueError) as exc:
        print(f"cannot read {args.path}: {exc}", file=sys.stderr)
        return 2
    if card.compute_digest() != card.formal_sha256:
        print(
            "warning: formal_sha256 does not match the formal layer (edited card); run "
            "'card verify'.",
            file=sys.stderr,
        )
    print(card.to_json() if args.format == "json" else card.to_markdown(), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``privconf_sklearn`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m privconf_sklearn",
        description="Differentially private conformal prediction for scikit-learn.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="train a diffprivlib model and calibrate it with every mechanism"
    )
    demo.add_argument("--n-samples", type=int, default=10000)
    demo.add_argument("--alpha", type=float, default=0.1)
    demo.add_argument("--epsilon-model", type=float, default=2.0)
    demo.add_argument("--epsilon-cal", type=float, default=1.0)
    demo.add_argument("--score", choices=["lac", "aps"], default="lac")
    demo.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the privacy noise (reproducible, not for production); default: OS entropy",
    )
    demo.set_defaults(handler=_demo)
    card = commands.add_parser(
        "card",
        help="show or verify a contract card (JSON); verify exits 0 if the contract is met, "
        "1 if not (or no contract), 2 if the card is unreadable or inconsistent",
    )
    card.add_argument("action", choices=["show", "verify"])
    card.add_argument("path", help="card JSON file (ContractCard.save)")
    card.add_argument("--format", choices=["markdown", "json"], default="markdown")
    card.set_defaults(handler=_card)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m privconf_sklearn``."""
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
