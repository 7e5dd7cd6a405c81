"""Forward-mode AD (``staged.autograd.forward_ad``) against torch 2.13's forward AD."""

import math
import re

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import staged
import staged.autograd.forward_ad as sfw
from staged.autodiff import REGISTRY
from tests.autodiff.test_primitives import (
    DIFFERENTIABLE,
    NO_FORWARD_AD,
    NOT_DIFFERENTIATED,
    _float_samples,
    _varied,
    torch_op,
)
from tests.checks import assert_close


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_tangents_through_every_primitive_match_torch(name):
    prim = REGISTRY[name]
    for xs, params in _float_samples(name):
        varied = _varied(name, xs)
        vs = [np.random.standard_normal(x.shape) if i in varied else None for i, x in enumerate(xs)]
        if name in NO_FORWARD_AD:  # raises, as torch's
            with sfw.dual_level(), pytest.raises(NotImplementedError, match="forward AD"):
                prim(*[sfw.make_dual(staged.tensor(x), staged.tensor(x)) for x in xs], **params)
            continue
        with sfw.dual_level():
            ins = [
                staged.tensor(x) if v is None else sfw.make_dual(staged.tensor(x), staged.tensor(v))
                for x, v in zip(xs, vs)
            ]
            s_out = sfw.unpack_dual(prim(*ins, **params))
        if name in NOT_DIFFERENTIATED:  # torch 2.13 has no forward AD for it at all: ours
            assert_close(s_out.primal, torch_op(name)(*map(torch.tensor, xs), **params))
            continue  # is checked against finite differences in tests/autodiff
        with tfw.dual_level():
            ins = [
                torch.tensor(x) if v is None else tfw.make_dual(torch.tensor(x), torch.tensor(v))
                for x, v in zip(xs, vs)
            ]
            t_out = tfw.unpack_dual(torch_op(name)(*ins, **params))
        assert_close(s_out.primal, t_out.primal)
        if t_out.tangent is None:  # torch 2.13 has none (scatter_reduce's prod): ours is
            continue  # checked against finite differences in tests/autodiff
        assert_close(s_out.tangent, t_out.tangent, rtol=1e-6, atol=1e-9)


def _composite(lib, x, w):
    h = (x @ w).tanh()
    return (h.softmax(-1) * h.sigmoid()).sum(0).log1p() + h.amax(0).exp() - h.mean()


def test_composite_function_value_and_tangent():
    x, w, v = np.random.randn(4, 3), np.random.randn(3, 5), np.random.randn(3, 5)
    res = []
    for lib, fw in ((staged, sfw), (torch, tfw)):
        with fw.dual_level():
            out = _composite(lib, lib.tensor(x), fw.make_dual(lib.tensor(w), lib.tensor(v)))
            p, t = fw.unpack_dual(out)
            assert type(fw.unpack_dual(out)).__name__ == "UnpackedDualTensor"
            res.append((p, t))
    assert_close(res[0][0], res[1][0])
    assert_close(res[0][1], res[1][1], rtol=1e-6, atol=1e-9)


def test_forward_over_reverse_gives_the_hessian_vector_product():
    x, w1, w2 = np.random.randn(8, 5), np.random.randn(5, 6) * 0.5, np.random.randn(6, 1)
    v = np.random.randn(5, 6)
    res = []
    for lib, fw in ((staged, sfw), (torch, tfw)):
        W1 = lib.tensor(w1, requires_grad=True)
        with fw.dual_level():
            d = fw.make_dual(W1, lib.tensor(v))
            loss = ((lib.tensor(x) @ d).tanh() @ lib.tensor(w2)).exp().mean()
            (g,) = lib.autograd.grad(loss, d)
            res.append(fw.unpack_dual(g).tangent)
    assert_close(res[0], res[1], rtol=1e-6, atol=1e-9)


def test_errors_match_torch():
    x = np.ones(3)
    for lib, fw in ((staged, sfw), (torch, tfw)):
        with pytest.raises(
            RuntimeError, match="no level exists, make sure to enter_dual_level\\(\\) first"
        ):
            fw.make_dual(lib.tensor(x), lib.tensor(x))
        with pytest.raises(RuntimeError, match="Dual level must be a positive number"):
            fw.exit_dual_level()
        with fw.dual_level():
            msg = (
                "Trying to set a forward gradient that has a different size than that of the "
                "original Tensor, this is not supported. Tensor is of size [3] while the given "
                "forward gradient is of size [4]."
            )
            with pytest.raises(RuntimeError, match=re.escape(msg)):
                fw.make_dual(lib.tensor(x), lib.tensor(np.ones(4)))
            with pytest.raises(
                ValueError, match="Expected primal to be floating point or complex, but got"
            ):
                fw.make_dual(lib.tensor([1, 2]), lib.tensor([1.0, 2.0]))
            with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
                fw.enter_dual_level()


def test_tangents_belong_to_tensors_and_die_with_the_level():
    x = np.array([1.0, 2.0])
    for lib, fw in ((staged, sfw), (torch, tfw)):
        plain = lib.tensor(x)
        assert fw.unpack_dual(plain) == (plain, None)
        with fw.dual_level():
            d = fw.make_dual(plain, lib.ones(2, dtype=lib.float64))
            assert fw.unpack_dual(plain).tangent is None  # make_dual returns a new view
            assert fw.unpack_dual(d.detach()).tangent is None
            assert fw.unpack_dual(d.data).tangent is None
            p, t = fw.unpack_dual(d)
            assert fw.unpack_dual(p).tangent is None and t is not None
        assert fw.unpack_dual(d).tangent is None


def test_level_off_costs_nothing_on_the_hot_path():
    from staged.autodiff.primitive import _bind
    from staged.eager import dispatch

    assert _bind[0] is dispatch.apply
    with sfw.dual_level():
        assert _bind[0] is not dispatch.apply
    assert _bind[0] is dispatch.apply


def test_in_place_ops_update_the_tangent():
    res = []
    for lib, fw in ((staged, sfw), (torch, tfw)):
        with fw.dual_level():
            e = fw.make_dual(lib.ones(3), lib.tensor([1.0, 2.0, 3.0]))
            scaled = e.clone()
            scaled.mul_(2)
            plain = lib.ones(3)
            plain.add_(e)
            cleared = e.clone()
            cleared.copy_(lib.zeros(3))
            res.append([fw.unpack_dual(t).tangent for t in (scaled, plain, cleared)])
    for s, t in zip(*res):
        assert_close(s, t)


def _writes_through_views(lib, fw):
    """Writes through views and into bases with views; the tangents of every tensor."""

    def dual(n, *t):
        return fw.make_dual(lib.zeros(n, dtype=lib.float64), lib.tensor(t, dtype=lib.float64))

    out = []
    b = lib.zeros(3, dtype=lib.float64)  # base without tangent, written through a view
    v, w = b[0], b[1:]
    v.copy_(dual(1, 5.0)[0])
    out += [b, v, w, b[2]]
    y = dual(3, 0.0, 1.0, 2.0).clone()  # base with tangent, a view zeroed
    v, w = y[1:], y[:2]
    v.zero_()
    out += [y, v, w]
    y = dual(3, 0.0, 1.0, 2.0).clone()  # the base written, its views follow
    v = y.unsqueeze(0)[:, 1:]
    y.mul_(2)
    out += [y, v]
    p = lib.zeros(3, dtype=lib.float64)  # make_dual's result is a forward base
    d = fw.make_dual(p, lib.tensor([3.0, 3.0, 3.0], dtype=lib.float64))
    e = d[1:]
    e.mul_(2)
    p.copy_(dual(3, 7.0, 7.0, 7.0))
    out += [p, d, e]
    x = dual(3, 1.0, 1.0, 1.0).clone()  # and so is unpack_dual's primal
    pr = fw.unpack_dual(x).primal
    pr[1:].copy_(dual(2, 5.0, 5.0))
    out += [x, pr]
    return [fw.unpack_dual(t).tangent for t in out]


def test_writes_through_views_update_the_tangents_of_the_base_and_its_views():
    res = []
    for lib, fw in ((staged, sfw), (torch, tfw)):
        with fw.dual_level():
            res.append(_writes_through_views(lib, fw))
    for k, (s, t) in enumerate(zip(*res)):
        assert (s is None) == (t is None), k
        if t is not None:
            assert_close(s, t)


CLAMPS = {
    "min": lambda lib, x: lib.clamp(x, min=0.0),
    "max": lambda lib, x: lib.clamp(x, max=1.0),
    "both": lambda lib, x: lib.clamp(x, 0.0, 1.0),
    "crossed": lambda lib, x: lib.clamp(x, 1.0, 0.0),
    "tensor_min": lambda lib, x: lib.clamp(x, min=x * 0),
    "tensor_max": lambda lib, x: lib.clamp(x, max=x * 0 + 1),
    "tensor_both": lambda lib, x: lib.clamp(x, x * 0, x * 0 + 1),
    "tensor_crossed": lambda lib, x: lib.clamp(x, x * 0 + 1, x * 0),
    "clamp_min_tensor": lambda lib, x: lib.clamp_min(x, x * 0),
    "clamp_max_tensor": lambda lib, x: lib.clamp_max(x, x * 0 + 1),
    "clamp_min_scalar": lambda lib, x: lib.clamp_min(x, 0.0),
    "nan_bound": lambda lib, x: lib.clamp(x * 0 + 1, min=x),
    "constant_bound": lambda lib, x: lib.clamp(x, min=lib.zeros(5, dtype=lib.float64)),
}


@pytest.mark.parametrize("name", CLAMPS)
def test_clamp_tangents_at_ties_and_nan_follow_torch(name):
    """PyTorch's clamp JVP is not its VJP's transpose at a bound or NaN (clamp_where)."""
    x = np.array([0.0, 1.0, np.nan, -1.0, 2.0])
    with sfw.dual_level():
        d = sfw.make_dual(staged.tensor(x), staged.tensor(np.full(5, 3.0)))
        got = sfw.unpack_dual(CLAMPS[name](staged, d)).tangent
    _, want = torch.func.jvp(
        lambda t: CLAMPS[name](torch, t),
        (torch.tensor(x),),
        (torch.full((5,), 3.0, dtype=torch.float64),),
    )
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_a_constant_infinity_beside_a_tangent_is_not_nan():
    """A linear op's missing tangents are zeros, not the primal times 0: ``m - x`` with
    ``m = -inf`` gave a NaN tangent there (and logcumsumexp's, whose scan shifts -inf in),
    where torch gives -t."""
    m = [-math.inf, 1.0]
    for lib in (torch, staged):
        x, t = lib.tensor([0.5, -1.0]), lib.tensor([1.0, 0.3])
        (_, a), (_, b) = (
            lib.func.jvp(lambda x: lib.tensor(m) - x, (x,), (t,)),
            lib.func.jvp(lambda x: lib.cat([lib.tensor(m), x]), (x,), (t,)),
        )
        if lib is torch:
            want = a.tolist(), b.tolist()
    assert (a.tolist(), b.tolist()) == want


def test_closing_the_level_frees_forward_over_reverse_graphs_without_the_collector():
    """The tangent of a saved output is computed from that output, so the SavedTensor
    holding it closes a cycle back to its node (Note [saved tangents close with the
    level]): closing the level breaks it, and jacfwd(jacrev(f)) leaves nothing for the
    cyclic collector (which counts objects, not bytes, and so can wait while gigabytes
    of payloads pile up)."""
    import gc
    import weakref

    kept = []

    def f(x):
        s = x.softmax(0)
        kept.append(weakref.ref(s))
        return (s.log() * x).sum()

    x = staged.randn(4, dtype=staged.float64)
    h = staged.func.hessian(f)(x)
    xt = torch.tensor(x.numpy(), requires_grad=True)
    want = torch.func.hessian(lambda v: (v.softmax(0).log() * v).sum())(xt)
    np.testing.assert_allclose(h.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    gc.collect()
    gc.disable()
    try:
        kept.clear()
        staged.func.hessian(f)(x)
        assert kept and all(r() is None for r in kept)
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_a_broadcasting_copy_writes_the_tangent_in_the_written_tensors_shape():
    # fuzzer find: copy_ of a (1,) dual into a (1, 1) tensor left a (1,) tangent
    outs = []
    for lib, fw in ((staged, sfw), (torch, tfw)):
        with fw.dual_level():
            src = fw.make_dual(lib.tensor([0.0]), lib.tensor([2.0]))
            dst = fw.make_dual(lib.tensor([[0.0], [1.0]]), lib.tensor([[1.0], [1.0]])).clone()
            dst.copy_(src)
            outs.append(np.asarray(fw.unpack_dual(dst).tangent))
    assert outs[0].shape == outs[1].shape == (2, 1)
    np.testing.assert_array_equal(outs[0], outs[1])
