"""docs/errors.md's table of the ten most likely mistakes is true: each mistake, made here,
raises the exception the table names with exactly the message it shows, beginning with the
``file:line`` of the user's code (this file), shown in the table as ``<file>:<line>``."""

import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import staged
import staged.distributed as dist
import staged.nn.functional as F

DOC = Path(__file__).resolve().parent.parent / "docs" / "errors.md"
_ROW = re.compile(r"^\| (\d+) \| (.*?) \| `(\w+)` \| `(.*)` \|$", re.MULTILINE)


def table() -> dict:
    """``{row number: (exception name, message)}`` of the doc's table."""
    return {int(m[1]): (m[3], m[4]) for m in _ROW.finditer(DOC.read_text())}


def _model():
    staged.manual_seed(0)
    net = staged.nn.Linear(4, 3)
    return net, staged.optim.SGD(net.parameters(), lr=0.1)


def float_labels():
    net, _ = _model()
    F.cross_entropy(net(staged.randn(2, 4)), staged.tensor([0.0, 2.0]))


def compiled_shape_mismatch():
    net, _ = _model()

    @staged.compile
    def step(x):
        loss = net(x).sum()
        loss.backward()
        return loss

    step(staged.randn(2, 4))
    step(staged.randn(2, 5))


def item_in_step():
    net, _ = _model()

    @staged.compile
    def step(x):
        loss = net(x).sum()
        print(loss.item())
        return loss

    step(staged.randn(2, 4))


def branch_in_step():
    net, _ = _model()

    @staged.compile
    def step(x):
        loss = net(x).sum()
        if loss > 0:
            loss = loss * 2
        return loss

    step(staged.randn(2, 4))


def backward_twice():
    net, _ = _model()
    loss = net(staged.randn(2, 4)).sum()
    loss.backward()
    loss.backward()


def inplace_on_leaf():
    w = staged.randn(3, requires_grad=True)
    w.add_(1)


def index_out_of_range_in_step():
    emb = staged.nn.Embedding(5, 2)
    step = staged.compile(lambda i: emb(i).sum())
    with staged.no_grad():  # an inference step compiles (Note [autograd boundary])
        out = step(staged.tensor([7]))
    assert step.traces == 1
    out.item()


def no_process_group():
    dist.all_reduce(staged.ones(2))


def mixed_dtypes():
    staged.randn(2, 3) @ staged.randn(3, 2, dtype=staged.float64)


def backward_of_non_scalar():
    net, _ = _model()
    net(staged.randn(2, 4)).backward()


CASES = {
    1: float_labels,
    2: compiled_shape_mismatch,
    3: item_in_step,
    4: branch_in_step,
    5: backward_twice,
    6: inplace_on_leaf,
    7: index_out_of_range_in_step,
    8: no_process_group,
    9: mixed_dtypes,
    10: backward_of_non_scalar,
}


def test_the_table_has_the_ten_cases():
    assert sorted(table()) == sorted(CASES)


@pytest.mark.parametrize("row", sorted(CASES))
def test_each_mistake_gives_the_message_in_the_doc(row):
    name, message = table()[row]
    with pytest.raises(Exception) as err:
        CASES[row]()
    assert type(err.value).__name__ == name
    text = str(err.value)
    site = re.match(r"(\S+?):(\d+): ", text)
    assert site and site[1].endswith("test_errors_doc.py"), text  # the user's line
    rest = re.sub(r"\S+test_errors_doc\.py:\d+", "<file>:<line>", text[site.end() :])
    assert f"<file>:<line>: {rest}" == message
    # it is the line in this file that made the mistake
    line = Path(__file__).read_text().splitlines()[int(site[2]) - 1]
    assert any(
        k in line
        for k in (
            "cross_entropy",
            "net(x)",
            ".item()",
            "if loss",
            ".backward()",
            "add_",
            "emb(i)",
            "all_reduce",
            "@",
        )
    ), line


def test_the_doc_example_runs_as_shown():
    with pytest.raises(RuntimeError, match=r"use target\.long\(\)"):
        float_labels()
    assert np.isfinite(F.cross_entropy(staged.randn(2, 3), staged.tensor([0, 2])).item())


def _here(offset: int) -> str:
    """``file:line`` of the line ``offset`` below the caller's."""
    f = sys._getframe(1)
    return f"{os.path.relpath(f.f_code.co_filename)}:{f.f_lineno + offset}: "


@pytest.mark.parametrize(
    "mistake",
    [
        "numpy of a tensor that requires grad",
        "unknown backend",
        "save before the first call",
        "unknown mode",
    ],
)
def test_other_mistakes_name_the_users_line(mistake):
    w = staged.ones(2, requires_grad=True)
    step = staged.compile(lambda x: (x * 2).sum())
    with pytest.raises((RuntimeError, ValueError)) as err:
        if mistake == "numpy of a tensor that requires grad":
            site = _here(1)
            w.numpy()
        elif mistake == "unknown backend":
            site = _here(1)
            staged.compile(lambda x: x, backend="vulkan")
        elif mistake == "save before the first call":
            site = _here(1)
            step.save("unused")
        else:
            site = _here(1)
            staged.compile(lambda x: x, mode="later")
    assert str(err.value).startswith(site), (str(err.value), site)


def test_a_failed_retrace_says_what_changed_in_a_note():
    with pytest.raises(RuntimeError) as err:
        compiled_shape_mismatch()
    assert err.value.__notes__ == [
        "staged.compile re-traced step because x: shape (2, 4) -> (2, 5)"
    ]
