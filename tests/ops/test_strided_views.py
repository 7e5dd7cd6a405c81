"""diagonal, unfold and as_strided are views (the ``strided`` primitive), as torch 2.13's:
writes through them reach the base, the base's writes show in them, they share its
version counter, and gradients (overlapping windows summing theirs) and writes through
them differentiate as torch's, eagerly and in a compiled step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, compare, raises_like_torch


def matrix(m, n=3, k=3, grad=False):
    return m.tensor(np.arange(n * k, dtype=np.float64).reshape(n, k) ** 1.5, requires_grad=grad)


def cube(m):
    return m.tensor(np.arange(24, dtype=np.float64).reshape(2, 3, 4) ** 1.5)


# (name, a view of x for the library m, x's maker)
VIEWS = [
    ("diagonal", lambda x: x.diagonal(), matrix),
    ("diagonal(1)", lambda x: x.diagonal(1), matrix),
    ("diagonal(-1) of 3x4", lambda x: x.diagonal(-1), lambda m: matrix(m, 3, 4)),
    ("diagonal(0, 1, 2) of 3-D", lambda x: x.diagonal(0, 1, 2), cube),
    ("diagonal(1, 2, 0) of 3-D", lambda x: x.diagonal(1, 2, 0), cube),
    ("diagonal of a transpose", lambda x: x.transpose(1, 2).diagonal(0, 0, 2), cube),
    ("unfold(0, 2, 1)", lambda x: x.unfold(0, 2, 1), matrix),
    ("unfold(1, 2, 2) of 3-D", lambda x: x.unfold(1, 2, 2), cube),
    ("unfold of a transpose", lambda x: x.t().unfold(0, 2, 1), matrix),
    ("as_strided((2,), (2,))", lambda x: x.as_strided((2,), (2,)), matrix),
    ("as_strided overlapping", lambda x: x.as_strided((3, 3), (1, 1), 1), matrix),
    ("as_strided 2-D", lambda x: x.as_strided((2, 2), (4, 1), 1), cube),
    ("as_strided of a transpose", lambda x: x.t().as_strided((3, 2), (1, 3)), matrix),
]
IDS = [v[0] for v in VIEWS]
# a write into overlapping windows is torch's kernel order (its row written twice): left out
OVERLAP = ("unfold(0, 2, 1)", "unfold of a transpose", "as_strided overlapping")
DISJOINT = [v for v in VIEWS if v[0] not in OVERLAP]


@pytest.mark.parametrize("view, make", [v[1:] for v in VIEWS], ids=IDS)
def test_values_and_sharing(view, make):
    def run(m):
        x = make(m)
        v = view(x)
        return v.clone(), v._base is x or v._base is x._base, v.is_contiguous()

    ours, theirs = run(staged), run(torch)
    assert_close(ours[0], theirs[0])
    assert ours[1:] == theirs[1:] == (True, theirs[2])


@pytest.mark.parametrize("view, make", [v[1:] for v in VIEWS], ids=IDS)
def test_base_written_then_view_read(view, make):
    def run(m):
        x = make(m)
        v = view(x)
        before = v._version
        x.add_(1)
        return v.clone(), v._version - before

    compare(run)


def test_writes_through_the_view_reach_the_base():
    compare(lambda m: (lambda x: (x.diagonal().add_(1), x)[1])(matrix(m)))
    compare(lambda m: (lambda x: (x.diagonal(1).fill_(0), x)[1])(matrix(m)))
    compare(lambda m: (lambda x: (m.diagonal(x, 0, 1, 2).mul_(-1), x)[1])(cube(m)))
    compare(lambda m: (lambda x: (x.unfold(0, 2, 1)[0].__setitem__(0, 100.0), x)[1])(m.arange(5.0)))
    compare(
        lambda m: (lambda x: (x.as_strided((2,), (2,)).__setitem__(1, 100.0), x)[1])(m.arange(5.0))
    )


def test_version_counter_is_shared():
    def run(m):
        x = matrix(m)
        d = x.diagonal()
        d.add_(1)
        return x._version, d._version

    ours, theirs = run(staged), run(torch)
    assert ours == theirs


@pytest.mark.parametrize("view, make", [v[1:] for v in VIEWS], ids=IDS)
def test_gradient(view, make):
    def run(m):
        x = make(m).requires_grad_()
        v = view(x)
        w = m.tensor(np.linspace(-1, 2, v.numel()).reshape(v.shape))
        (v * w).sum().backward()
        return x.grad

    compare(run)


@pytest.mark.parametrize("view, make", [v[1:] for v in DISJOINT], ids=[v[0] for v in DISJOINT])
def test_gradient_of_a_write_through_the_view(view, make):
    def run(m):
        x = make(m).requires_grad_()
        y = x * 1
        view(y).mul_(2)
        (y * y).sum().backward()
        return y.detach(), x.grad

    compare(run)


def test_diagonal_add_of_a_grad_requiring_value():
    def run(m):
        a = matrix(m, grad=True)
        e = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        c = a * 1
        c.diagonal().add_(e * e)
        (c**2).sum().backward()
        return c.detach(), a.grad, e.grad, c.grad_fn.name().split("::")[-1]

    compare(lambda m: run(m)[:3])
    assert run(staged)[3] == run(torch)[3]


def test_diag_of_a_matrix_stays_a_copy():
    def run(m):
        x = matrix(m)
        d = m.diag(x)
        d.add_(1)
        return x

    compare(run)


def test_as_strided_outside_the_tensor_refuses():
    raises_like_torch(lambda m: m.arange(4.0).as_strided((3,), (2,)), "out of bounds")
    with pytest.raises(NotImplementedError, match="outside this tensor's own entries"):
        staged.arange(8.0)[2:4].as_strided((2,), (3,))


def test_compiled_step_writes_the_diagonal():
    def step(w, x):
        w = w * 1
        w.diagonal().add_(x)
        return w, w.unfold(0, 2, 1).sum(-1), w.diagonal(1)

    w = matrix(staged).float()
    x = staged.tensor([1.0, 2.0, 3.0])
    for got, want in zip(staged.compile(step)(w, x), step(w, x)):
        assert_close(got, want, 1e-6, 1e-6)
    tw = matrix(torch).float()
    tw.diagonal().add_(torch.tensor([1.0, 2.0, 3.0]))
    assert_close(step(w, x)[0], tw)


def test_compiled_gradient_through_the_views():
    def loss(w):
        return (w.diagonal() ** 2).sum() + (w.unfold(1, 2, 1) ** 3).sum()

    def step(w):
        w = w.detach().requires_grad_()
        loss(w).backward()
        return w.grad

    w = matrix(staged).float()
    tw = matrix(torch).float().requires_grad_()
    loss(tw).backward()
    assert_close(staged.compile(step)(w), tw.grad, 1e-5, 1e-5)


def test_as_strided_captures_a_tensor_that_is_not_a_view():
    def step(w):
        w = w * 1
        w.as_strided((2,), (5,), 1).mul_(10)
        return w, w.as_strided((3, 2), (1, 1)), w.as_strided((3,), (2,)) + 1

    w = staged.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    for got, want in zip(staged.compile(step)(w), step(w)):
        assert_close(got, want)
    tw = torch.arange(12.0).reshape(3, 4)
    tw.as_strided((2,), (5,), 1).mul_(10)
    assert_close(step(w)[0], tw)


def test_as_strided_of_a_view_refuses_under_capture():
    with pytest.raises(RuntimeError, match="as_strided\\(\\) of a view reads the view's memory"):
        staged.capture(lambda x: x.t().as_strided((2,), (1,)), staged.ones(2, 3))


def test_as_strided_with_uneven_steps_through_a_view_is_a_copy():
    # positions 0, 2, 4 of a 4x4 storage are entries 0, 2, 3 of x = base[:, :3]: no view
    def run(m):
        x = m.arange(16.0).reshape(4, 4)[:, :3]
        return x.as_strided((3,), (2,), 0)

    ours, theirs = run(staged), run(torch)
    assert_close(ours, theirs)
    assert ours._base is None


@pytest.mark.parametrize(
    "fn",
    [lambda a: a.diagonal(), lambda a: a.diagonal(1, 0, 2), lambda a: a.unfold(1, 2, 1)],
)
def test_vmap_of_a_strided_view_and_its_gradient_as_torch(fn):
    """vmap's rule for the strided primitive: the batch is one more dim of stride n."""
    x = np.arange(48.0).reshape(2, 3, 2, 4)
    ours = staged.func.vmap(fn)(staged.tensor(x))
    theirs = torch.func.vmap(fn)(torch.tensor(x))
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())

    def loss(lib):
        return lambda a: (fn(a) ** 2).sum()

    g = staged.func.vmap(staged.func.grad(loss(staged)))(staged.tensor(x))
    gt = torch.func.vmap(torch.func.grad(loss(torch)))(torch.tensor(x))
    np.testing.assert_array_equal(g.numpy(), gt.numpy())
