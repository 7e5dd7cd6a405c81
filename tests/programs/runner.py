"""The compatibility suite's runner: each PyTorch program runs three ways in its own
process — with torch, with staged standing in for torch (``python -m staged.torch_compat``)
and, where it names its training step, with that step compiled — and the losses it prints
are compared.

    python -m tests.programs.runner [--dir DIR] [PROGRAM ...]

prints the README's table (``--readme`` writes it there). ``--dir`` runs every ``*.py`` of
another directory (PyTorch's examples, say) the same way. A program may say how to read it in one comment line:

    # compat: step=train_step loss="loss: (\\S+)" rtol=1e-4

``step`` names the function to compile (none: no compiled pass), ``loss`` the regex whose
last match is the final loss (default: the last number on the last line that says
"loss"), ``rtol`` how close staged's final loss must be to torch's (default 1e-4),
``crtol`` how close the compiled pass's must be to staged's eager one (default 1e-3:
float32 kernels that sum in other orders), ``why`` the notes of a looser one.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "scripts"
_LOSS_LINE = re.compile(r"loss", re.I)
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf", re.I)


@dataclasses.dataclass(frozen=True)
class Spec:
    step: str | None = None
    loss: str | None = None
    rtol: float = 1e-4
    crtol: float = 1e-3  # compiled against eager: IREE's kernels sum in other orders
    why: str = ""


def spec(path: Path) -> Spec:
    """The program's ``# compat:`` line (``Spec()`` without one)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# compat:"):
            fields = dict(f.split("=", 1) for f in shlex.split(line[len("# compat:") :]))
            return Spec(
                fields.get("step"),
                fields.get("loss"),
                float(fields.get("rtol", 1e-4)),
                float(fields.get("crtol", 1e-3)),
                fields.get("why", ""),
            )
    return Spec()


@dataclasses.dataclass
class Run:
    loss: float | None
    seconds: float
    error: str = ""


def final_loss(out: str, pattern: str | None) -> float | None:
    if pattern:
        found = re.findall(pattern, out)
        return float(found[-1]) if found else None
    for line in reversed(out.splitlines()):
        if _LOSS_LINE.search(line) and (nums := _NUMBER.findall(line)):
            return float(nums[-1])
    return None


@functools.cache
def run(path: Path, mode: str, timeout: float = 300) -> Run:
    """Run ``path`` as ``mode`` (torch, eager or compiled) in a fresh process, in a scratch
    directory (programs write checkpoints)."""
    s, path = spec(path), path.resolve()
    shim = [sys.executable, "-m", "staged.torch_compat"]
    cmd = {
        "torch": [sys.executable, str(path)],
        "eager": [*shim, str(path)],
        "compiled": [*shim, "--compile", str(s.step), str(path)],
    }[mode]
    # one thread: small programs gain nothing from more, and a loaded machine (CI's two
    # cores under pytest) made torch's spinning OpenMP threads take 20x longer
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as cwd:
        try:
            p = subprocess.run(
                cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return Run(None, timeout, f"timed out after {timeout:.0f} s")
    took = time.perf_counter() - start
    if p.returncode:
        last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return Run(None, took, last)
    loss = final_loss(p.stdout, s.loss)
    return Run(loss, took, "" if loss is not None else "printed no loss")


def close(a: float, b: float, rtol: float) -> bool:
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-12)


def programs(directory: Path = PROGRAMS) -> list:
    return sorted(p for p in directory.glob("*.py") if not p.name.startswith("_"))


def row(path: Path) -> list:
    """[program, eager, compiled, notes] of the README table."""
    s = spec(path)
    ref, eager = run(path, "torch"), run(path, "eager")
    if eager.error or ref.error:
        cell = f"fails: {eager.error or 'torch: ' + ref.error}"
    elif close(eager.loss, ref.loss, s.rtol):
        cell = "yes" if s.rtol <= 1e-4 else f"yes (within {100 * s.rtol:g} %)"
    else:
        cell = f"no: loss {eager.loss:.4g}, torch's {ref.loss:.4g}"
    if s.step is None:
        comp = "no step function"
    else:
        c = run(path, "compiled")
        comp = (
            f"fails: {c.error}"
            if c.error
            else "no eager loss"
            if eager.loss is None
            else f"no: loss {c.loss:.4g}, eager's {eager.loss:.4g}"
            if not close(c.loss, eager.loss, s.crtol)
            else "yes"
            if s.crtol <= 1e-3
            else f"yes (within {100 * s.crtol:g} %)"
        )
    return [f"`{path.stem}`", cell, comp, s.why]


HEADER = "| program | eager (vs torch) | compiled step (vs eager) | notes |\n|---|---|---|---|"


def line(path: Path) -> str:
    """The README table's line for ``path``."""
    return "| " + " | ".join(row(path)) + " |"


def table(paths) -> str:
    return "\n".join([HEADER, *(line(p) for p in paths)])


README = ROOT / "README.md"
BEGIN, END = "<!-- programs: python -m tests.programs.runner --readme -->", "<!-- /programs -->"


def readme_table() -> str:
    """The table as README has it (between ``BEGIN`` and ``END``)."""
    text = README.read_text(encoding="utf-8")
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip()


def readme_lines() -> dict:
    """{program name: its line} of README's table."""
    rows = readme_table().splitlines()[2:]
    return {r.split("`")[1]: r for r in rows}


def write_readme(tab: str) -> None:
    text = README.read_text(encoding="utf-8")
    a, b = text.index(BEGIN) + len(BEGIN), text.index(END)
    README.write_text(text[:a] + "\n" + tab + "\n" + text[b:], encoding="utf-8")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", type=Path, default=PROGRAMS)
    p.add_argument("--readme", action="store_true", help="write the table into README.md")
    p.add_argument("names", nargs="*", help="program names (default: all)")
    a = p.parse_args(argv)
    paths = [x for x in programs(a.dir) if not a.names or x.stem in a.names]
    tab = table(paths)
    if a.readme:
        write_readme(tab)
    print(tab)
    return 0


if __name__ == "__main__":
    sys.exit(main())
