"""The engine's loop for plain Nodes (Note [plain nodes] in staged/autograd/engine.py)
against torch: what takes a Node off it (a hook, also once removed; retain_grad; a leaf's
tensor hook; several outputs) and how gradients meet in its input buffers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, to_torch


def _leaf_node_hooks(lib, x, kinds):
    """The order in which a leaf's AccumulateGrad pre- and post-hooks and a tensor hook
    on the leaf (those of ``kinds``) run."""
    seen = []
    acc = (x * 1.0).grad_fn.next_functions[0][0]
    if "pre" in kinds:
        acc.register_prehook(lambda gs: seen.append("pre"))
    if "post" in kinds:
        acc.register_hook(lambda gi, go: seen.append("post"))
    if "tensor" in kinds:
        x.register_hook(lambda g: seen.append("tensor"))
    (x * x).sum().backward()
    return seen


@pytest.mark.parametrize("kinds", [("pre",), ("post",), ("tensor",), ("pre", "post", "tensor")])
def test_leaf_accumulate_grad_hooks_run_as_torch(kinds):
    x = staged.tensor([1.0, -2.0, 3.0], requires_grad=True)
    tx = to_torch(x)
    assert _leaf_node_hooks(staged, x, kinds) == _leaf_node_hooks(torch, tx, kinds)
    assert_close(x.grad, tx.grad)


def _node_hook(lib, x, kind):
    """Whether a pre-hook or post-hook of a Node mid-chain runs, and what it returns."""
    y = x * 2.0
    if kind == "pre":
        y.grad_fn.register_prehook(lambda gs: (gs[0] * 3.0,))
    else:
        y.grad_fn.register_hook(lambda gi, go: tuple(None if g is None else -g for g in gi))
    y.exp().sum().backward()
    return x.grad


@pytest.mark.parametrize("kind", ["pre", "post"])
def test_node_hook_mid_chain_as_torch(kind):
    x = staged.tensor([0.1, 0.2, -0.3], requires_grad=True)
    assert_close(_node_hook(staged, x, kind), _node_hook(torch, to_torch(x), kind))


def _removed(lib, x):
    calls = []
    y = x * 2.0
    h = y.register_hook(lambda g: calls.append(1) or g * 10.0)
    p = y.grad_fn.register_prehook(lambda gs: calls.append(2))
    q = y.grad_fn.register_hook(lambda gi, go: calls.append(3))
    for handle in (h, p, q):
        handle.remove()
    y.exp().sum().backward()
    return calls


def test_removed_hooks_leave_nothing_behind():
    x = staged.tensor(np.linspace(-1.0, 1.0, 5), requires_grad=True)
    tx = to_torch(x)
    assert _removed(staged, x) == _removed(torch, tx) == []
    assert_close(x.grad, tx.grad)


def test_retain_grad_and_hook_replacing_a_gradient_mid_chain():
    grads = {}
    for lib in (staged, torch):
        x = lib.tensor([0.5, -1.5, 2.0], requires_grad=True)
        a = x.sin()
        a.retain_grad()
        b = a * 3.0
        b.register_hook(lambda g: g * 2.0)
        b.relu().sum().backward()
        grads[lib] = (a.grad, x.grad)
    for got, want in zip(grads[staged], grads[torch]):
        assert_close(got, want)


def test_gradients_meeting_in_one_buffer():
    """The same tensor twice into one Node (x + x), a piece of a multi-output Node alone,
    and two pieces of it, as torch."""
    out = {}
    for lib in (staged, torch):
        x = lib.tensor(np.arange(6.0), requires_grad=True)
        a, b, c = (x + x).split(2)
        (c * 3.0).sum().backward(retain_graph=True)
        first = x.grad.clone()
        (a.exp().sum() + (b * c).sum()).backward()
        out[lib] = (first, x.grad)
    for got, want in zip(out[staged], out[torch]):
        assert_close(got, want)


def test_shared_gradient_into_two_leaves_is_copied():
    """add's VJP sends one tensor to both leaves: each .grad must be its own, as torch's."""
    x = staged.tensor([1.0, 2.0], requires_grad=True)
    y = staged.tensor([3.0, 4.0], requires_grad=True)
    (x + y).sum().backward()
    x.grad.mul_(5.0)
    tx, ty = to_torch(x), to_torch(y)
    (tx + ty).sum().backward()
    tx.grad.mul_(5.0)
    assert_close(x.grad, tx.grad)
    assert_close(y.grad, ty.grad)
