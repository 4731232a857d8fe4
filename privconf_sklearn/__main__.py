"""Command line: ``python -m privconf_sklearn demo``."""

from __future__ import annotations

import argparse
import sys


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
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m privconf_sklearn``."""
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
