"""The compatibility suite's runner: each PyTorch program runs three ways in its own
process — with torch, with staged standing in for torch (``python -m staged.torch_compat``)
and, where it names its training step, with that step compiled — and the losses it prints
are compared.

    python -m tests.programs.runner [--dir DIR] [PROGRAM ...]

prints the README's table (``--readme`` writes it there). ``--record`` runs each program
(those named) with torch and writes its final loss to ``torch_losses.json``, which the suite reads in
place of a torch run while the program's files and torch's version are those recorded
(``fingerprint``): torch's runs are deterministic, and were a fifth of the suite's
program time. ``--dir`` runs every ``*.py`` of
another directory (PyTorch's examples, say) the same way. A program of several files is a
subdirectory: its entry is the one file with a ``# compat:`` line, and it runs in a copy of
the subdirectory (so it imports its modules and reads its files as in its own checkout). A
program may say how to read it in one comment line:

    # compat: step=train_step loss="loss: (\\S+)" rtol=1e-4 args="--epochs 2"

``step`` names the function to compile (none: no compiled pass), ``loss`` the regex whose
last match is the final loss (default: the last number on the last line that says
"loss"), ``rtol`` how close staged's final loss must be to torch's (default 1e-4),
``crtol`` how close the compiled pass's must be to staged's eager one (default 1e-3:
float32 kernels that sum in other orders), ``why`` the notes of a looser one, ``args`` the
command line the program runs with (its smaller sizes, say), ``before`` the scripts of a
subdirectory's program to run first, in the same mode, comma-separated (one that writes the
data set, say).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
import re
import shlex
import shutil
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
    args: tuple = ()
    before: tuple = ()


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
                tuple(shlex.split(fields.get("args", ""))),
                tuple(filter(None, fields.get("before", "").split(","))),
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


RECORDED = Path(__file__).resolve().parent / "torch_losses.json"


def fingerprint(path: Path) -> str:
    """What a torch run of the program depends on, hashed: its files (a subdirectory's
    for a program of several files; its ``# compat:`` line among them) and torch's
    version."""
    path = path.resolve()
    files = [path] if path.parent == PROGRAMS else sorted(path.parent.rglob("*.py"))
    h = hashlib.sha256(importlib.metadata.version("torch").encode())
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def recorded(path: Path) -> dict | None:
    """The recorded torch run of ``path`` (``{"fingerprint", "loss"}``), or None."""
    return json.loads(RECORDED.read_text(encoding="utf-8")).get(name(path))


def record(paths) -> None:
    """Run ``paths`` with torch and write their final losses to ``RECORDED``, keeping the
    records of the other programs there still are."""
    kept = json.loads(RECORDED.read_text(encoding="utf-8"))
    out = {name(p): kept[name(p)] for p in programs() if name(p) in kept}
    for p in paths:
        r = _run(p, "torch")
        if r.error or r.loss is None:
            raise RuntimeError(f"{name(p)}: torch's run failed: {r.error}")
        out[name(p)] = {"fingerprint": fingerprint(p), "loss": r.loss}
    RECORDED.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def run(path: Path, mode: str, root: Path = PROGRAMS, timeout: float = 300) -> Run:
    """``_run``, once per program, mode and root however they are passed; a torch run of
    one of this suite's programs is its recorded loss while that is current
    (``fingerprint``)."""
    return _run_once(Path(path).resolve(), mode, Path(root).resolve(), timeout)


@functools.cache
def _run_once(path: Path, mode: str, root: Path, timeout: float) -> Run:
    if mode == "torch" and root == PROGRAMS:
        rec = recorded(path)
        if rec is not None and rec["fingerprint"] == fingerprint(path):
            return Run(rec["loss"], 0.0)
    return _run(path, mode, root, timeout)


def _run(path: Path, mode: str, root: Path = PROGRAMS, timeout: float = 300) -> Run:
    """Run ``path`` (a program of ``root``) as ``mode`` (torch, eager, compiled, or onnx: the
    compiled step run as its ONNX export in onnxruntime, ``onnx_step.py``) in a fresh
    process, in a scratch directory (programs write checkpoints): a copy of its subdirectory
    for a program of several files, after its ``before`` scripts."""
    s, path = spec(path), path.resolve()
    shim = [
        sys.executable,
        "-m",
        "tests.programs.onnx_step" if mode == "onnx" else "staged.torch_compat",
    ]
    torch_or_shim = [sys.executable] if mode == "torch" else shim
    compiling = ["--compile", str(s.step)] if mode in ("compiled", "onnx") else []
    # one thread: small programs gain nothing from more, and a loaded machine (CI's two
    # cores under pytest) made torch's spinning OpenMP threads take 20x longer
    env = {
        "ATEN_CPU_CAPABILITY": "avx2",  # torch's kernels as under pytest, a record too
        "ONEDNN_MAX_CPU_ISA": "AVX2",  # (Note [torch's kernels per CPU] in tests/conftest.py)
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as cwd:
        # a program's own torch.compile: inductor's cache is not keyed on
        # ATEN_CPU_CAPABILITY, and one filled without it gave NaN losses and crashes with it
        env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(cwd) / ".inductor")
        if path.parent != root.resolve():  # a program of several files
            shutil.copytree(path.parent, cwd, dirs_exist_ok=True)
            path = Path(cwd) / path.name
        cmds = [[*torch_or_shim, str(Path(cwd) / b)] for b in s.before]
        cmds.append([*torch_or_shim, *compiling, str(path), *s.args])
        try:
            for cmd in cmds:
                p = subprocess.run(
                    cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
                )
                if p.returncode:
                    last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
                    return Run(None, time.perf_counter() - start, last)
        except subprocess.TimeoutExpired:
            return Run(None, timeout, f"timed out after {timeout:.0f} s")
    loss = final_loss(p.stdout, s.loss)
    return Run(loss, time.perf_counter() - start, "" if loss is not None else "printed no loss")


def close(a: float, b: float, rtol: float) -> bool:
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-12)


def _compat(path: Path) -> bool:
    return any(
        line.startswith("# compat:") for line in path.read_text(encoding="utf-8").splitlines()
    )


def programs(directory: Path = PROGRAMS) -> list:
    """The programs of ``directory``, by name: its ``*.py`` files, and the entry (the one
    file with a ``# compat:`` line) of each subdirectory that holds a program of several
    files."""
    found = [p for p in directory.glob("*.py") if not p.name.startswith("_")]
    for sub in directory.iterdir():
        if sub.is_dir() and not sub.name.startswith(("_", ".")):
            entries = [p for p in sub.glob("*.py") if _compat(p)]
            if len(entries) > 1:
                raise ValueError(
                    f"{sub}: a program of several files has one entry, the one file with "
                    f"a '# compat:' line, not {len(entries)}"
                )
            found += entries
    return sorted(found, key=lambda p: name(p, directory))


def name(path: Path, root: Path = PROGRAMS) -> str:
    """The program's name: its file's, or its subdirectory's for one of several files."""
    return path.stem if path.parent.resolve() == root.resolve() else path.parent.name


def row(path: Path, root: Path = PROGRAMS) -> list:
    """[program, eager, compiled, notes] of the README table."""
    s = spec(path)
    ref, eager = run(path, "torch", root), run(path, "eager", root)
    if eager.error or ref.error:
        cell = f"fails: {eager.error or 'torch: ' + ref.error}"
    elif close(eager.loss, ref.loss, s.rtol):
        cell = "yes" if s.rtol <= 1e-4 else f"yes (within {100 * s.rtol:g} %)"
    else:
        cell = f"no: loss {eager.loss:.4g}, torch's {ref.loss:.4g}"
    if s.step is None:
        comp = "no step function"
    else:
        c = run(path, "compiled", root)
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
    return [f"`{name(path, root)}`", cell, comp, s.why]


HEADER = "| program | eager (vs torch) | compiled step (vs eager) | notes |\n|---|---|---|---|"


def line(path: Path, root: Path = PROGRAMS) -> str:
    """The README table's line for ``path``."""
    return "| " + " | ".join(row(path, root)) + " |"


def table(paths, root: Path = PROGRAMS) -> str:
    return "\n".join([HEADER, *(line(p, root) for p in paths)])


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
    p.add_argument("--record", action="store_true", help="write torch's losses (RECORDED)")
    p.add_argument("names", nargs="*", help="program names (default: all)")
    a = p.parse_args(argv)
    paths = [x for x in programs(a.dir) if not a.names or name(x, a.dir) in a.names]
    if a.record:
        record([x for x in programs() if not a.names or name(x) in a.names])
        return 0
    tab = table(paths, a.dir)
    if a.readme:
        write_readme(tab)
    print(tab)
    return 0


if __name__ == "__main__":
    sys.exit(main())
