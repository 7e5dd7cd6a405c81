"""The engine's common case against torch: Nodes without hooks called in the loop, a node
made ready alone run without the ready queue, and a leaf's first gradient becoming
``.grad`` without a copy when nothing else holds it."""

from __future__ import annotations

import numpy as np
import torch

import staged
from tests.checks import assert_close, to_torch


def _order(lib, x, w):
    """The order in which the gradients of a chain, a diamond and a second chain are
    computed: tensor hooks run as their Node is reached, not changing the fast path."""
    seen = []

    def tag(t, name):
        t.register_hook(lambda g: seen.append(name))
        return t

    a = tag(x * w, "a")
    b = tag(a.relu(), "b")  # a chain
    c = tag(b.exp(), "c")  # a diamond: c and d both from b
    d = tag(b * 3.0, "d")
    e = tag(c + d, "e")
    f = tag(e.sin().sum(), "f")  # a chain again, to the root
    f.backward()
    return seen


def test_execution_order_matches_torch_on_chains_and_a_diamond():
    x = staged.tensor(np.linspace(-1.0, 1.0, 6), requires_grad=True)
    w = staged.tensor(np.linspace(0.5, 2.0, 6), requires_grad=True)
    tx, tw = to_torch(x), to_torch(w)
    assert _order(staged, x, w) == _order(torch, tx, tw)
    assert_close(x.grad, tx.grad)
    assert_close(w.grad, tw.grad)


def test_first_gradient_is_not_shared_with_what_a_hook_kept():
    kept = {}
    for lib, x in (
        (staged, staged.tensor([1.0, 2.0, 3.0], requires_grad=True)),
        (torch, torch.tensor([1.0, 2.0, 3.0], requires_grad=True)),
    ):

        def keep(g, lib=lib):
            kept[lib] = g * 2.0
            return kept[lib]

        x.register_hook(keep)
        (x * x).sum().backward()
        first = np.array(kept[lib].detach().numpy())
        (x * x).sum().backward()  # accumulates into .grad in place
        assert_close(kept[lib], first)  # the hook's tensor was copied, not written
        assert not x.grad.requires_grad and x.grad.grad_fn is None
        assert_close(x.grad, 2 * first)


def test_owned_first_gradient_accumulates_as_torch():
    x = staged.tensor(np.arange(4.0), requires_grad=True)
    tx = to_torch(x)
    for _ in range(3):
        (x * x + x).relu().sum().backward()
        (tx * tx + tx).relu().sum().backward()
    assert not x.grad.requires_grad and x.grad.grad_fn is None and x.grad._base is None
    assert_close(x.grad, tx.grad)
