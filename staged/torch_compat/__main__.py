"""``python -m staged.torch_compat [--compile NAME] script.py [args...]``: run a PyTorch
script with staged as torch (``staged.torch_compat.run``)."""

import argparse
import sys

from . import run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m staged.torch_compat",
        description="Run a PyTorch script with staged as torch.",
    )
    p.add_argument(
        "--compile", metavar="NAME", help="wrap the script's function NAME in staged.compile"
    )
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    run(a.script, a.args, step=a.compile)
    return 0


sys.exit(main())
