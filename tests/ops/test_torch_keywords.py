"""torch's keyword names for positional arguments (``torch.add(input=a, other=b)``,
``torch.take_along_dim(input=t, indices=i, dim=1)`` as transformers' beam search calls
it): every public op takes them, whatever staged names its parameters."""

import inspect
import re

import numpy as np
import torch

import staged
from staged.eager.ops.table import _EXPORTED, TORCH_POSITIONAL
from tests.checks import raises_like_torch


def _torch_positional(name):
    """torch's names of ``name``'s positional parameters, from its docstring's signature."""
    doc = getattr(getattr(torch, name, None), "__doc__", None)
    first = (doc or "").strip().split("\n")[0]
    m = re.match(rf"{name}\((.*)\)\s*->", first) or re.match(rf"{name}\((.*)\)\s*$", first)
    if m is None:
        return None
    names = []
    for p in re.sub(r"\[[^]]*\]+|\([^)]*\)", "", m.group(1)).split(","):  # no inner commas
        p = p.strip()
        if p == "*" or p.startswith("*"):
            break
        if p:
            names.append(p.split("=")[0].split(":")[0].strip())
    return names


def test_every_op_takes_torchs_keyword_names():
    missing = []
    checked = 0
    for name in sorted(_EXPORTED):
        theirs = _torch_positional(name)
        if not theirs or not hasattr(staged, name) or name == "broadcast_to":
            # (torch's docstring names broadcast_to's size "shape"; its parser takes "size")
            continue
        try:
            sig = inspect.signature(getattr(staged, name)).parameters
        except (TypeError, ValueError):
            continue
        positional = [n for n, p in sig.items() if p.kind is not p.KEYWORD_ONLY]
        checked += 1
        for i, t in enumerate(theirs):
            ok = t in sig or (TORCH_POSITIONAL.get(t) == i and i < len(positional))
            if not ok:
                missing.append((name, t))
    assert checked > 200 and not missing, missing


def test_keywords_give_torchs_results():
    x = np.arange(6.0).reshape(2, 3)
    i = np.array([[0], [2]])

    def run(T):
        t, idx = T.tensor(x), T.tensor(i)
        return [
            T.take_along_dim(input=t, indices=idx, dim=1),
            T.add(input=t, other=t, alpha=2),
            T.mm(input=t, mat2=t.t()),
            T.pow(t, exponent=2),
            T.gather(input=t, dim=1, index=idx),
            T.where(T.gt(input=t, other=1.0), t, -t),
            T.dot(input=t[0], tensor=t[1]),
            T.outer(input=t[0], vec2=t[1]),
            T.broadcast_to(input=t[0], size=(2, 3)),  # (its docstring says shape)
            T.sum(t, axis=1, keepdims=True),
        ]

    for ours, theirs in zip(run(staged), run(torch)):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_keyword_and_position_together_raise_as_torch():
    raises_like_torch(lambda T: T.add(T.ones(2), input=T.ones(2)))  # (torch: "missing")
    raises_like_torch(lambda T: T.add(T.ones(2), T.ones(2), foo=1), "unexpected keyword")
