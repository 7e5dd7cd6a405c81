"""The documentation is tested: README.md's and docs/*.md's code blocks run as a reader
would run them, from the repository root.

The "root" is a temporary directory holding links to the repository's files, so what the
blocks write stays out of the checkout. Each file's ``python`` blocks run in order in one
fresh interpreter, sharing one namespace; a traceback names the file and its line. Then
each ``sh`` block runs as one ``bash -e`` script, with the venv's ``bin`` first on
``PATH`` (as after ``. .venv/bin/activate``). A block the test must not run is preceded
by ``<!-- docs-test: skip REASON -->``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import jobs

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(
    r"(?:^<!-- docs-test: skip (?P<skip>[^\n]*?) -->\n)?"
    r"^```(?P<lang>\w*)[^\n]*\n(?P<body>.*?)^```",
    re.S | re.M,
)

# Runs the blocks: exec each with the file's line numbers, so tracebacks point at them.
_DRIVER = """
import json, sys
ns = {"__name__": "__main__"}
for name, line, src in json.loads(sys.stdin.read()):
    exec(compile("\\n" * (line - 1) + src, name, "exec"), ns)
"""


def blocks(doc: Path, lang: str) -> list[tuple[int, str]]:
    """``(first line, source)`` of the blocks of ``lang`` that are not marked skip."""
    text = doc.read_text()
    return [
        (text.count("\n", 0, m.start("body")) + 1, m["body"])
        for m in _BLOCK.finditer(text)
        if m["lang"] == lang and m["skip"] is None
    ]


def _run(args, cwd, **kw) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        OMP_NUM_THREADS="1",
        MPLBACKEND="Agg",
    )
    return jobs.run(args, cwd=cwd, env=env, timeout=600, **kw)


@pytest.mark.parametrize(
    "doc", [d for d in DOCS if blocks(d, "python") or blocks(d, "sh")], ids=lambda d: d.name
)
def test_doc_blocks_run(doc, tmp_path):
    for entry in ROOT.iterdir():
        if not entry.name.startswith(".git"):
            (tmp_path / entry.name).symlink_to(entry)
    rel = str(doc.relative_to(ROOT))
    code = [(rel, line, src) for line, src in blocks(doc, "python")]
    if code:
        r = _run([sys.executable, "-c", _DRIVER], tmp_path, input=json.dumps(code))
        assert r.returncode == 0, f"a python block of {rel} failed:\n{r.stderr[-4000:]}"
    for line, src in blocks(doc, "sh"):
        r = _run(["bash", "-ec", src], tmp_path)
        assert r.returncode == 0, (
            f"the sh block at {rel}:{line} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        )


def test_skip_marks_give_a_reason():
    for doc in DOCS:
        for m in _BLOCK.finditer(doc.read_text()):
            assert m["skip"] is None or len(m["skip"]) > 10, (doc.name, m["skip"])
