"""Sparse gradients against torch 2.13 (Note [sparse gradients] in staged/sparse.py):
``F.embedding(sparse=True)``'s weight gradient, its accumulation with sparse and dense
ones, ``zero_grad``, the optimizers that update with it (SGD, Adagrad, SparseAdam, LBFGS)
step by step, those that refuse it (nothing updated), and where it stays dense."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import to_numpy

pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks")

IDX = [[1, 4, 4], [0, 2, 1]]  # row 4 twice, row 0 the padding row below
W = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)


def weight(ns, w=W):
    return ns.tensor(w, requires_grad=True)


def lookup(ns, w, idx=IDX, **kw):
    return ns.nn.functional.embedding(ns.tensor(idx), w, sparse=True, **kw)


def grads(ns, run):
    w = weight(ns)
    run(ns, w)
    return w


def same_grad(run, dense=False):
    ours, theirs = grads(staged, run).grad, grads(torch, run).grad
    assert ours.is_sparse == theirs.is_sparse == (not dense)
    if not dense:
        assert ours._nnz() == theirs._nnz() and not ours.is_coalesced()
        ours, theirs = ours.coalesce(), theirs.coalesce()
        np.testing.assert_array_equal(to_numpy(ours.indices()), to_numpy(theirs.indices()))
        ours, theirs = ours.values(), theirs.values()
    np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), rtol=1e-6, atol=1e-7)


def test_the_weight_gradient_is_torchs_sparse_tensor():
    def run(ns, w):
        out = lookup(ns, w, padding_idx=0)
        (out * ns.arange(1.0, 4.0)).sum().backward()
        assert type(out.grad_fn).__name__ == "EmbeddingBackward0"

    same_grad(run)
    w = grads(staged, run)
    t = grads(torch, run)
    np.testing.assert_array_equal(to_numpy(w.grad._indices()), t.grad._indices().numpy())
    assert w.grad._indices().tolist() == [[1, 4, 4, 2, 1]]  # the padding index left out


@pytest.mark.parametrize(
    "how",
    ["twice", "sparse_and_dense_in_one_backward", "dense_grad_first", "two_lookups"],
)
def test_gradients_accumulate_as_torchs(how):
    def run(ns, w):
        if how == "dense_grad_first":
            w.grad = ns.ones_like(w)
            kept = w.grad
        if how == "sparse_and_dense_in_one_backward":
            (lookup(ns, w).sum() + (w * w).sum()).backward()
        elif how == "two_lookups":
            (lookup(ns, w).sum() + lookup(ns, w, [[5, 1]]).pow(2).sum()).backward()
        else:
            lookup(ns, w).sum().backward()
            lookup(ns, w, [[3, 1]]).pow(2).sum().backward()
        if how == "dense_grad_first":
            assert w.grad is kept  # added to in place

    same_grad(run, dense=how in ("sparse_and_dense_in_one_backward", "dense_grad_first"))


@pytest.mark.parametrize(
    "mode, kwargs",
    [
        ("sum", dict(per_sample_weights=True, padding_idx=0)),
        ("mean", {}),
        ("mean", dict(two_d=True)),
    ],
)
def test_embedding_bag_gives_torchs_sparse_gradient(mode, kwargs):
    kw = dict(kwargs)
    two_d, weighted = kw.pop("two_d", False), kw.pop("per_sample_weights", False)
    psw = {}

    def run(ns, w):
        idx = ns.tensor([1, 4, 4, 0, 2, 5])
        offsets = None if two_d else ns.tensor([0, 2, 2])  # the middle bag empty
        if two_d:
            idx = idx.reshape(2, 3)
        if weighted:
            psw[ns] = ns.arange(1.0, 7.0).requires_grad_()
        out = ns.nn.functional.embedding_bag(
            idx, w, offsets, mode=mode, sparse=True, per_sample_weights=psw.get(ns), **kw
        )
        (out * ns.arange(1.0, out.numel() + 1).reshape(out.shape)).sum().backward()

    same_grad(run)
    if psw:
        # float32 dot products of 3 terms, summed in other orders
        np.testing.assert_allclose(
            to_numpy(psw[staged].grad), psw[torch].grad.numpy(), rtol=1e-6, atol=1e-6
        )


def test_scale_grad_by_freq_raises_torchs_error_in_backward():
    for ns in (staged, torch):
        out = lookup(ns, weight(ns), scale_grad_by_freq=True)
        with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse"):
            out.sum().backward()


def test_zero_grad_without_none_empties_it():
    for ns in (staged, torch):
        w = weight(ns)
        lookup(ns, w).sum().backward()
        ns.optim.SGD([w], lr=0.1).zero_grad(set_to_none=False)
        assert w.grad.is_sparse and w.grad._nnz() == 0 and w.grad.shape == w.shape


def test_where_torch_would_be_sparse_but_the_weight_is_computed_the_gradient_is_dense():
    def run(ns, w):
        lookup(ns, w * 2).sum().backward()

    ours, theirs = grads(staged, run).grad, grads(torch, run).grad
    assert not ours.is_sparse and theirs.is_sparse
    np.testing.assert_array_equal(to_numpy(ours), theirs.to_dense().numpy())
    for ns in (staged, torch):
        w = weight(ns)
        (g,) = ns.autograd.grad(lookup(ns, w).sum(), [w])
        assert g.is_sparse


OPTIMIZERS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, maximize=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
    ("SparseAdam", dict(lr=0.05)),
    ("SparseAdam", dict(lr=0.05, betas=(0.8, 0.9), maximize=True)),
]


@pytest.mark.parametrize("name, kwargs", OPTIMIZERS)
def test_optimizers_step_with_sparse_gradients_as_torchs(name, kwargs):
    rows = [[[1, 4, 4]], [[0, 2]], [[4, 5, 1, 1]], [[3]]]
    trajectories = []
    for ns in (staged, torch):
        w = weight(ns)
        opt = getattr(ns.optim, name)([w], **kwargs)
        seen = []
        for r in rows:
            opt.zero_grad()
            lookup(ns, w, r).pow(2).sum().backward()
            opt.step()
            seen.append(to_numpy(w.detach()).copy())
        trajectories.append(np.stack(seen))
    np.testing.assert_allclose(trajectories[0], trajectories[1], rtol=1e-5, atol=1e-6)


def test_lbfgs_reads_a_sparse_gradient_as_dense():
    finals = []
    for ns in (staged, torch):
        w = weight(ns)
        opt = ns.optim.LBFGS([w], lr=0.5, max_iter=5)

        def closure():
            opt.zero_grad()
            loss = (lookup(ns, w) - 1).pow(2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        finals.append(to_numpy(w.detach()))
    np.testing.assert_allclose(finals[0], finals[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("Adam", {}),
        ("AdamW", {}),
        ("RMSprop", {}),
        ("NAdam", {}),
        ("Adagrad", dict(weight_decay=0.1)),
        ("SGD", dict(lr=0.1, weight_decay=0.1)),
    ],
)
def test_optimizers_refuse_sparse_gradients_with_torchs_error_before_any_update(name, kwargs):
    messages = []
    for ns in (staged, torch):
        first = ns.ones(2, requires_grad=True)
        w = weight(ns)
        (first.sum() + lookup(ns, w).sum()).backward()
        opt = getattr(ns.optim, name)([first, w], **kwargs)
        with pytest.raises(RuntimeError) as err:
            opt.step()
        messages.append(str(err.value))
        if ns is staged:  # torch's loop has updated ``first`` already for SGD and Adagrad
            assert first.tolist() == [1.0, 1.0]
            np.testing.assert_array_equal(to_numpy(w.detach()), W)
    assert messages[0] == messages[1]


def test_sparse_adam_refuses_a_dense_gradient_before_any_update():
    w, b = weight(staged), staged.zeros(3, requires_grad=True)
    (lookup(staged, w).sum() + b.sum()).backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        staged.optim.SparseAdam([w, b]).step()
    np.testing.assert_array_equal(to_numpy(w.detach()), W)


def test_compiled_steps_see_the_dense_gradient():
    emb = staged.nn.Embedding(6, 3, sparse=True)
    sgd = staged.optim.SGD(emb.parameters(), lr=0.1)
    ref = staged.nn.Embedding(6, 3)
    ref.load_state_dict(emb.state_dict())
    ref_sgd = staged.optim.SGD(ref.parameters(), lr=0.1)

    def step(model, opt, idx):
        opt.zero_grad()
        loss = model(idx).pow(2).sum()
        loss.backward()
        opt.step()
        return loss

    compiled = staged.compile(step)
    idx = staged.tensor(IDX)
    for _ in range(2):
        compiled(emb, sgd, idx)
        step(ref, ref_sgd, idx)
    np.testing.assert_allclose(
        to_numpy(emb.weight.detach()), to_numpy(ref.weight.detach()), rtol=1e-6
    )
