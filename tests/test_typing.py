"""staged ships its type hints (PEP 561: staged/py.typed): mypy checks a user's program
against the public API, passing correct use and reporting misuse."""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import staged

pytest.importorskip("mypy", reason="mypy is not installed (it is in the test extra)")

# what a user writes: factories, Tensor methods and operators, autograd, nn, optim, compile
GOOD = """
from __future__ import annotations

import numpy as np
from typing_extensions import assert_type

import staged
from staged import nn, optim


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 1)

    def forward(self, x: staged.Tensor) -> staged.Tensor:
        return self.fc2(staged.relu(self.fc1(x)))


def loss_fn(x: staged.Tensor) -> staged.Tensor:
    return (x * x).sum()


x = staged.tensor([1.0, 2.0, 3.0], requires_grad=True)
z = staged.zeros(2, 3)
z2 = staged.zeros((2, 3), dtype=staged.float64)
r = staged.randn(3, 2)
assert_type(x, staged.Tensor)
assert_type(z @ r, staged.Tensor)
assert_type(z + 1, staged.Tensor)
assert_type(2.0 * z - z2 / 3, staged.Tensor)
assert_type(-z, staged.Tensor)
assert_type(z[0], staged.Tensor)
assert_type(z.shape, staged.Size)
assert_type(z.ndim, int)
assert_type(z.numel(), int)
assert_type(z.T, staged.Tensor)
assert_type(z.reshape(3, 2).mean(dim=0), staged.Tensor)
assert_type(z.float().to(staged.float64), staged.Tensor)
assert_type(z.split(1), tuple[staged.Tensor, ...])
assert_type(z == z2, staged.Tensor)

y = (x * 2).sum()
y.backward()
assert_type(x.grad, staged.Tensor | None)
if x.grad is not None:
    g: np.ndarray = x.grad.numpy()
v = y.item()
a: np.ndarray = x.detach().numpy()
assert_type(x.detach(), staged.Tensor)
x.requires_grad_(False).add_(1.0)
x.uniform_(0.0, 1.0)

model = MLP()
out = model(staged.randn(5, 4))
opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
adam = optim.Adam(model.parameters(), lr=1e-3)
for o in (opt, adam):
    o.zero_grad()
    model(staged.randn(5, 4)).sum().backward()
    o.step()
lin = nn.Linear(3, 2)
h = lin(staged.randn(4, 3))

with staged.no_grad():
    w = staged.ones(3) * 2

step = staged.compile(loss_fn)
step(staged.randn(3))


@staged.compile
def train_step(x: staged.Tensor) -> staged.Tensor:
    return loss_fn(x)


train_step(staged.randn(3))

p = staged.randn(3, requires_grad=True)
(gp,) = staged.autograd.grad(loss_fn(p), [p])
dloss = staged.func.grad(loss_fn)
batched = staged.func.vmap(staged.func.grad(loss_fn))(staged.randn(4, 3))
"""

# the same API misused: each line the comment names must be reported
BAD = """
import staged

x = staged.zeros("3")  # error: arg-type
x.no_such_method()  # error: attr-defined
n: int = staged.tensor([1.0])  # error: assignment
x.sum().backward(1, 2, 3, 4, 5, 6)  # error: call-arg
"""


def _mypy(tmp_path: Path, files: list[Path]) -> list[str]:
    """mypy's error lines for ``files``, staged imported as a user's program imports it."""
    config = tmp_path / "mypy.ini"
    # staged's own errors are its CI's (`make lint`), not the user's: silent, as for an
    # installed package; the user's code is checked strictly as to what staged gives it
    config.write_text(
        textwrap.dedent(
            """
            [mypy]
            warn_unused_ignores = True
            [mypy-staged.*]
            follow_imports = silent
            """
        )
    )
    env = dict(os.environ)
    root = str(Path(staged.__file__).resolve().parent.parent)
    installed = {str(Path(p).resolve()) for p in site.getsitepackages()}
    if root not in installed:  # a checkout or editable install: mypy cannot follow its hook
        env["MYPYPATH"] = root
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "--no-error-summary",
            "--hide-error-context",
            "--show-error-codes",
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    if proc.returncode not in (0, 1) or proc.stderr.strip():
        pytest.fail(f"mypy did not run (exit {proc.returncode}):\n{proc.stderr}{proc.stdout}")
    return [line for line in proc.stdout.splitlines() if ": error:" in line]


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory) -> dict[str, list[str]]:
    """One mypy run over both programs (staged and NumPy are analysed once): the error
    lines of each."""
    tmp = tmp_path_factory.mktemp("typing")
    files = {"good": tmp / "good_client.py", "bad": tmp / "bad_client.py"}
    files["good"].write_text(GOOD)
    files["bad"].write_text(BAD)
    errors = _mypy(tmp, list(files.values()))
    return {k: [e for e in errors if e.startswith(f.name + ":")] for k, f in files.items()}


def test_typed_client_passes(mypy_errors):
    assert mypy_errors["good"] == []


def test_misuse_is_reported(mypy_errors):
    expected = {
        k + 1: m.group(1)
        for k, line in enumerate(BAD.splitlines())
        if (m := re.search(r"# error: ([\w-]+)", line))
    }
    found: dict[int, str] = {}
    for e in mypy_errors["bad"]:
        m = re.match(r"[^:]+:(\d+): error: .*\[([\w-]+)\]$", e)
        assert m, e
        found.setdefault(int(m.group(1)), m.group(2))
    assert found == expected, "\n".join(mypy_errors["bad"])
