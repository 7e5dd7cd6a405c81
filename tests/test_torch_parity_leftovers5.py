"""Leftover differences from torch 2.13, each checked against torch: draws made outside
``drawn`` (``nn.init``'s, ``F.rrelu``'s, the C++ samplers') hold the generator's lock as
torch's kernels hold its mutex (Note [one draw at a time] in
staged/eager/random/generator.py); grad_fn names of fills and decompositions; one Node
for the pieces of ``split``/``chunk``/``unbind`` (Note [multi-output views] in
staged/eager/views.py), so hooks on them run in torch's order, and a hook on an output no
gradient reached gets None. DDP's ``no_sync`` buffer broadcast is checked in
tests/distributed/probe2.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged.distributions
from tests.threads import in_threads, switching_often

# --- draws outside ``drawn`` from threads -----------------------------------------------------

DRAWS = {
    "orthogonal_ small": lambda L: L.nn.init.orthogonal_(L.empty(3, 3)),
    "sparse_ small": lambda L: L.nn.init.sparse_(L.empty(1, 9), 0.0),
    "sparse_ strided": lambda L: L.nn.init.sparse_(L.empty(1, 42)[:, ::2], 0.0),
    "trunc_normal_ small": lambda L: L.nn.init.trunc_normal_(L.empty(7), a=-100.0, b=100.0),
    "rrelu": lambda L: L.nn.functional.rrelu(-L.ones(30, dtype=L.float64), training=True),
    "RReLU": lambda L: L.nn.RReLU()(-L.ones(30)),
    "Poisson": lambda L: L.distributions.Poisson(L.full((20,), 3.0)).sample(),
    "Gamma": lambda L: L.distributions.Gamma(L.full((10,), 0.5, dtype=L.float64), 1.0).sample(),
}


@pytest.mark.parametrize("draw", DRAWS)
def test_threads_drawing_outside_drawn_each_take_a_run_of_the_stream(draw):
    """Two threads' results are those of the serial stream, in some order (torch's too).
    Odd sizes: a serial normal fill reads, then writes, the generator's cached sine."""
    fn, k = DRAWS[draw], 200

    def run(L):
        L.manual_seed(0)
        serial = sorted(repr(fn(L).tolist()) for _ in range(2 * k))
        L.manual_seed(0)
        got: list = []

        def work():
            for _ in range(k):
                got.append(repr(fn(L).tolist()))

        with switching_often():
            in_threads(work, work)
        return sorted(got) == serial

    assert (run(torch), run(staged)) == (True, True)


@pytest.mark.parametrize("draw", DRAWS)
def test_draws_outside_drawn_give_torchs_numbers(draw):
    fn = DRAWS[draw]
    torch.manual_seed(3)
    staged.manual_seed(3)
    want = [fn(torch).tolist() for _ in range(3)]
    got = [fn(staged).tolist() for _ in range(3)]
    # orthogonal_: the draws are torch's, the QR LAPACK's, in float32 (an ulp or two)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 if "orthogonal" in draw else 0)


# --- grad_fn names of fills and decompositions ---------------------------------------------------


def _fill(L, how):
    a = L.tensor([[4.0, 1.0], [1.0, 3.0]], requires_grad=True)
    y = a * 1 if how != "0-d" else a.sum() * 1
    if how == "tensor":
        return (y.fill_(L.tensor(2.0)),)
    return (y.zero_(),) if how == "zero_" else (y.fill_(2.0),)


def _matrix(L):
    return L.tensor([[4.0, 1.0], [1.0, 3.0]], requires_grad=True)


NAMED = {
    "fill_": lambda L: _fill(L, "number"),
    "fill_ 0-d": lambda L: _fill(L, "0-d"),
    "fill_ tensor": lambda L: _fill(L, "tensor"),
    "zero_": lambda L: _fill(L, "zero_"),
    "svd": lambda L: L.linalg.svd(_matrix(L)),
    "svd legacy": lambda L: L.svd(_matrix(L)),
    "svdvals": lambda L: (L.linalg.svdvals(_matrix(L)),),
    "qr": lambda L: L.linalg.qr(_matrix(L)),
    "eigh": lambda L: L.linalg.eigh(_matrix(L)),
    "eigvalsh": lambda L: (L.linalg.eigvalsh(_matrix(L)),),
    "eig": lambda L: L.linalg.eig(_matrix(L)),
    "eigvals": lambda L: (L.linalg.eigvals(_matrix(L)),),
    "slogdet": lambda L: L.linalg.slogdet(_matrix(L)),
    "lu": lambda L: L.linalg.lu(_matrix(L)),
    "lu_factor": lambda L: L.linalg.lu_factor(_matrix(L)),
    "lu_factor_ex": lambda L: L.linalg.lu_factor_ex(_matrix(L)),
    "cholesky": lambda L: (L.linalg.cholesky(_matrix(L)),),
    "cholesky upper": lambda L: (L.linalg.cholesky(_matrix(L), upper=True),),
    "cholesky_ex": lambda L: L.linalg.cholesky_ex(_matrix(L)),
    "inv": lambda L: (L.linalg.inv(_matrix(L)),),
    "inv_ex": lambda L: L.linalg.inv_ex(_matrix(L)),
    "sum and mean": lambda L: [
        f(_matrix(L), *dims) for f in (L.sum, L.mean) for dims in ((), (0,), ((0, 1),))
    ],
}


def _names(results) -> list:
    return [r.grad_fn.name() if r.grad_fn is not None else None for r in results]


@pytest.mark.parametrize("case", NAMED)
def test_grad_fn_names_of_fills_and_decompositions_are_torchs(case):
    assert _names(NAMED[case](staged)) == _names(NAMED[case](torch))


@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
def test_legacy_cholesky_is_named_as_torchs():
    assert _names([staged.cholesky(_matrix(staged))]) == _names([torch.cholesky(_matrix(torch))])


def test_a_fill_under_no_grad_keeps_the_tensors_node():
    def run(L):
        y = L.ones(3, requires_grad=True) * 2
        with L.no_grad():
            y.fill_(1.0)
            y.zero_()
        return y.grad_fn.name()

    assert run(staged) == run(torch) == "MulBackward0"


# --- one Node for split's, chunk's and unbind's pieces -------------------------------------------

PIECES = {
    "split": lambda x: x.split(2),
    "split_with_sizes": lambda x: x.split([1, 2, 3]),
    "chunk": lambda x: x.chunk(3),
    "unbind": lambda x: x.view(3, 2).unbind(0),
    "unbind dim 1": lambda x: x.view(2, 3).unbind(1),
    "unsafe_split": lambda x: x.unsafe_split(2),
    "tensor_split": lambda x: x.tensor_split(3),  # torch's: a SliceBackward0 each
}


def _listed(g):
    return None if g is None else g.tolist()


def _hook_order(L, op, order):
    """What runs, in order, in a backward that reaches the first and last pieces only:
    hooks on the pieces (registered in ``order``), the Node's pre- and post-hooks with the
    gradients they get, the input's hook; the pieces' Nodes and the input's gradient."""
    log: list = []
    x = L.arange(6.0, dtype=L.float64, requires_grad=True)
    y = x * 1
    pieces = op(y)
    y.register_hook(lambda g: log.append(("input", g.tolist())))
    for i in order:
        pieces[i].register_hook(lambda g, i=i: log.append((f"piece {i}", _listed(g))))
    pieces[1].retain_grad()
    fn = pieces[0].grad_fn
    fn.register_prehook(lambda go: log.append(("pre", [_listed(g) for g in go])))
    fn.register_hook(lambda gi, go: log.append(("post", len(gi), len(go))))
    (pieces[0].sum() + 2 * pieces[-1].sum()).backward()
    nodes = [p.grad_fn.name() for p in pieces]
    return log, nodes, [p.grad_fn is fn for p in pieces], pieces[1].grad, x.grad.tolist()


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1)])
@pytest.mark.parametrize("op", PIECES)
def test_hooks_on_the_pieces_and_their_node_run_as_torchs(op, order):
    assert _hook_order(staged, PIECES[op], order) == _hook_order(torch, PIECES[op], order)


def test_pieces_get_one_node_whose_backward_gives_torchs_gradients_to_second_order():
    def run(L):
        x = L.arange(6.0, dtype=L.float64, requires_grad=True)
        a, b, c = (x * x).unbind(0)[1:4]
        p, q = (x * x).split([2, 4])
        (g,) = L.autograd.grad((p * p).sum() + q.sum() * 3 + a * b * c, x, create_graph=True)
        return g.tolist(), L.autograd.grad(g.sum(), x)[0].tolist()

    assert run(staged) == run(torch)


def test_split_of_an_empty_dim_gives_one_empty_piece():
    def run(L):
        return [tuple(p.shape) for p in L.zeros(0, 3).split(2)]

    assert run(staged) == run(torch) == [(0, 3)]


def _two_outputs(L):
    class Two(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1, x * 2

        @staticmethod
        def backward(ctx, a, b):
            return a if b is None else a + b

    return Two


def test_a_hook_on_an_output_no_gradient_reached_gets_none_as_torchs():
    def run(L):
        log: list = []
        a, b = _two_outputs(L).apply(L.ones(2, requires_grad=True))
        b.register_hook(lambda g: log.append(("b", g)))
        a.register_hook(lambda g: log.append(("a", g.tolist())))
        a.sum().backward()
        return log

    assert run(staged) == run(torch) == [("b", None), ("a", [1.0, 1.0])]


def test_a_hook_replacing_a_none_gradient_raises_torchs_error():
    def run(L):
        a, b = _two_outputs(L).apply(L.ones(2, requires_grad=True))
        b.register_hook(lambda g: L.ones(2))
        with pytest.raises(RuntimeError) as e:
            a.sum().backward()
        return str(e.value)

    assert run(staged) == run(torch) == "can't replace a None gradient with a non-None value"
