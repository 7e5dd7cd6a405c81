"""``staged.view_as_real`` and ``staged.view_as_complex`` against torch 2.13: views of the
same memory (writes both ways, ``_base``, version counters), torch's layout checks and
errors, gradients in both modes (gradcheck, gradgradcheck, forward AD), writes through the
views part by part in the backward pass and under capture, vmap, and LLaMA's rotary
embeddings eager and compiled."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, assert_raises_like_torch, to_numpy

RNG = np.random.default_rng(0)


def _complex(shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _both(a):
    return staged.tensor(a.copy()), torch.tensor(a.copy())


# --- views ---------------------------------------------------------------------------------
VIEWS = {
    "contiguous": lambda ns, x: x,
    "transposed": lambda ns, x: x.t(),
    "sliced": lambda ns, x: x[1:, ::2],
    "row": lambda ns, x: x[1],
    "element": lambda ns, x: x[1, 2],
    "expanded": lambda ns, x: x[:1].expand(3, 4),
}


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_view_as_real_values_layout_and_base(view, dtype):
    s, t = _both(_complex((3, 4), dtype))
    sv, tv = VIEWS[view](staged, s), VIEWS[view](torch, t)
    r, tr = staged.view_as_real(sv), torch.view_as_real(tv)
    assert_close(r, tr, 0, 0)
    assert r.stride() == tr.stride() and r.storage_offset() == tr.storage_offset()
    assert r._base is s and tr._base is t
    back, tback = staged.view_as_complex(r), torch.view_as_complex(tr)
    assert_close(back, tback, 0, 0)
    assert back._base is s and back.stride() == tback.stride()


# float pairs torch views as complex (strides in elements, storage offsets even)
PAIRS = {
    "contiguous": lambda x: x,
    "rows-sliced": lambda x: x[1:],
    "pairs-sliced": lambda x: x[:, ::2],
    "batch-transposed": lambda x: x.transpose(0, 1),
    "expanded": lambda x: x[:1].expand(3, 4, 2),
    "one-pair": lambda x: x[1, 2],
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("view", sorted(PAIRS))
def test_view_as_complex_values_layout_and_base(view, dtype):
    s, t = _both(RNG.standard_normal((3, 4, 2)).astype(dtype))
    c, tc = staged.view_as_complex(PAIRS[view](s)), torch.view_as_complex(PAIRS[view](t))
    assert_close(c, tc, 0, 0)
    assert c.stride() == tc.stride() and c.storage_offset() == tc.storage_offset()
    assert c._base is s and tc._base is t


def test_writes_reach_the_other_side_with_torchs_versions():
    data = _complex((2, 3))

    def run(ns):
        z = ns.tensor(data.copy())
        r = ns.view_as_real(z)
        r[0, 1, 1] = 7.0  # the imaginary part of z[0, 1] only
        z[1].mul_(1j)  # through the base: r sees it
        c = ns.view_as_complex(r[1])
        c.add_(1)  # the real parts of z[1]
        return z, r, c, [t._version for t in (z, r, c)]

    (z, r, c, versions), (tz, tr, tc, tversions) = run(staged), run(torch)
    for a, b in zip((z, r, c), (tz, tr, tc)):
        assert_close(a, b, 1e-15, 0)
    assert versions == tversions == [3, 3, 3]


def test_a_fresh_tensor_in_numpys_other_layout_views_as_torchs_contiguous_one():
    """``x.t() + 0`` is contiguous in torch whatever layout NumPy gave its result."""
    x = staged.tensor(RNG.standard_normal((2, 3)))
    y = x.t() + 0  # NumPy keeps the transposed layout
    c = staged.view_as_complex(y)
    assert_close(c, torch.view_as_complex(torch.tensor(to_numpy(y))), 0, 0)
    c.mul_(2)
    assert_close(y, 2 * (x.t() + 0), 0, 0)


# --- errors ----------------------------------------------------------------------------------
ERRORS = {
    "real-of-float": lambda ns: ns.view_as_real(ns.ones(3)),
    "real-of-int": lambda ns: ns.view_as_real(ns.ones(3, dtype=ns.int64)),
    "complex-of-int": lambda ns: ns.view_as_complex(ns.ones(3, 2, dtype=ns.int64)),
    "complex-of-complex": lambda ns: ns.view_as_complex(ns.ones(3, 2, dtype=ns.complex64)),
    "complex-of-0d": lambda ns: ns.view_as_complex(ns.ones(())),
    "last-dim-3": lambda ns: ns.view_as_complex(ns.ones(4, 3)),
    "last-stride": lambda ns: ns.view_as_complex(ns.ones(2, 4).t()),
    "odd-stride": lambda ns: ns.view_as_complex(ns.ones(3, 5)[:, 1:3]),
    "odd-offset": lambda ns: ns.view_as_complex(ns.ones(3, 6)[:, 1:3]),
    "odd-offset-1d": lambda ns: ns.view_as_complex(ns.ones(5)[1:3]),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_are_torchs(name):
    assert_raises_like_torch(ERRORS[name])


def test_float16_would_be_complex32_which_staged_lacks():
    torch.view_as_complex(torch.ones(3, 2, dtype=torch.float16))  # complex32 in torch
    with pytest.raises(RuntimeError, match=r"complex32 \(ComplexHalf\).*x\.float\(\)"):
        staged.view_as_complex(staged.ones(3, 2, dtype=staged.float16))


# --- gradients -------------------------------------------------------------------------------
def _real_fn(ns, z, w):
    """A real loss through both views (a product of complex numbers in between)."""
    r = ns.view_as_real(z * w)
    c = ns.view_as_complex((r * r[..., :1]).contiguous())
    return (c * w.conj()).real.sin().sum() + r.tanh().sum()


def test_values_and_gradients_match_torch():
    z, w = _complex((3, 4)), _complex((3, 4))
    sz, sw = (staged.tensor(a, requires_grad=True) for a in (z, w))
    tz, tw = (torch.tensor(a, requires_grad=True) for a in (z, w))
    out, tout = _real_fn(staged, sz, sw), _real_fn(torch, tz, tw)
    assert_close(out, tout, 1e-13, 1e-13)
    out.backward()
    tout.backward()
    for a, b in ((sz, tz), (sw, tw)):
        assert_close(a.grad, b.grad, 1e-12, 1e-13)


def test_gradcheck_and_gradgradcheck():
    z = staged.tensor(_complex((2, 3)), requires_grad=True)
    x = staged.tensor(RNG.standard_normal((2, 3, 2)), requires_grad=True)
    for fn, arg in (
        (lambda z: staged.view_as_real(z * z), z),
        (lambda x: staged.view_as_complex(x * x), x),
        (lambda z: staged.view_as_complex(staged.view_as_real(z).exp()) * z, z),
    ):
        assert staged.autograd.gradcheck(fn, (arg,))
        assert staged.autograd.gradgradcheck(fn, (arg,))


def test_forward_ad_matches_torch():
    z, t = _complex((2, 3)), _complex((2, 3))
    x, u = RNG.standard_normal((2, 3, 2)), RNG.standard_normal((2, 3, 2))

    def fns(ns):
        return (
            lambda z: ns.view_as_real(z * z).sin(),
            lambda x: ns.view_as_complex(x * x).exp(),
        )

    for fn, tfn, primal, tangent in zip(fns(staged), fns(torch), (z, x), (t, u)):
        out = staged.func.jvp(fn, (staged.tensor(primal),), (staged.tensor(tangent),))
        tout = torch.func.jvp(tfn, (torch.tensor(primal),), (torch.tensor(tangent),))
        for a, b in zip(out, tout):
            assert_close(a, b, 1e-13, 1e-13)


WRITES = {
    # a part of each element: the rest keeps its gradient (the base's CopySlices per part)
    "imag-through-view_as_real": lambda ns, w: ns.view_as_real(w)[..., 1].mul_(3),
    "real-property": lambda ns, w: w.real.mul_(2),
    "imag-property": lambda ns, w: w.imag.copy_(w.real.detach() * 2),
    "pairs-through-view_as_complex": lambda ns, w: ns.view_as_complex(ns.view_as_real(w)[1:]).mul_(
        1j
    ),
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_gradient_through_a_write_into_part_of_each_element(name):
    data = _complex((3, 4))

    def run(ns):
        z = ns.tensor(data, requires_grad=True)
        w = z * 1.5
        WRITES[name](ns, w)
        (w.abs() ** 3).sum().backward()
        return w, z.grad

    for a, b in zip(run(staged), run(torch)):
        assert_close(a, b, 1e-12, 1e-13)


@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_write_into_part_of_each_element_compiles(name):
    """Under capture a write through a view rewrites the base part by part."""

    def step(z):
        w = z * 1.5
        WRITES[name](staged, w)
        return w

    z = staged.tensor(_complex((3, 4), np.complex64))
    assert_close(staged.compile(step)(z), step(z), 1e-6, 1e-6)


def test_no_grad_views_written_twice_under_no_grad():
    """An optimizer's pattern: a view of a weight made and written twice under no_grad."""

    data = _complex((3,))

    def run(ns):
        p = ns.tensor(data, requires_grad=True)
        with ns.no_grad():
            r = ns.view_as_real(p)
            r.mul_(2)
            r.add_(1)
        return p

    assert_close(run(staged), run(torch), 0, 0)


def test_vmap():
    z, x = _complex((4, 3)), RNG.standard_normal((3, 4, 2))
    assert_close(
        staged.func.vmap(staged.view_as_real)(staged.tensor(z)),
        torch.vmap(torch.view_as_real)(torch.tensor(z)),
        0,
        0,
    )
    for in_dims in (0, 1):
        assert_close(
            staged.func.vmap(staged.view_as_complex, in_dims=in_dims)(staged.tensor(x)),
            torch.vmap(torch.view_as_complex, in_dims=in_dims)(torch.tensor(x)),
            0,
            0,
        )
    # the batch last, behind the pairs (torch raises: a pair's parts are not adjacent)
    re_, im_ = RNG.standard_normal((2, 4, 3))
    pairs = staged.tensor(np.stack([re_, im_], 1))  # (4, 2, 3)
    got = staged.func.vmap(staged.view_as_complex, in_dims=2)(pairs)
    assert_close(got, (re_ + 1j * im_).T, 0, 0)


# --- LLaMA's rotary embeddings -----------------------------------------------------------------
B, S, H, D = 2, 5, 2, 8


def _rope_inputs():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((B, S, H * D)).astype(np.float32)
    wq, wk = (rng.standard_normal((H * D, H * D)).astype(np.float32) / 4 for _ in range(2))
    freqs = 1.0 / (10000.0 ** (np.arange(0, D, 2)[: D // 2] / D))
    angles = np.outer(np.arange(S), freqs)
    return x, wq, wk, np.exp(1j * angles).astype(np.complex64)  # freqs_cis (S, D / 2)


def _apply_rotary_emb(ns, xq, xk, freqs_cis):
    """LLaMA's, as written in its model.py."""
    xq_ = ns.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = ns.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = ns.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = ns.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def _rope_loss(ns, x, wq, wk, freqs_cis):
    xq, xk = (x @ w for w in (wq, wk))
    xq, xk = (t.view(B, S, H, D) for t in (xq, xk))
    q, k = _apply_rotary_emb(ns, xq, xk, freqs_cis)
    scores = (q.transpose(1, 2) @ k.transpose(1, 2).transpose(2, 3)) / D**0.5
    return scores.softmax(-1).sum(-1).mul(scores.mean(-1)).sum()


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_rotary_embeddings_match_torch(compiled):
    x, wq, wk, fc = _rope_inputs()
    params = [staged.tensor(w, requires_grad=True) for w in (wq, wk)]
    tparams = [torch.tensor(w, requires_grad=True) for w in (wq, wk)]

    def step(x, fc):
        loss = _rope_loss(staged, x, *params, fc)
        loss.backward()
        return loss

    run = staged.compile(step) if compiled else step
    loss = run(staged.tensor(x), staged.tensor(fc))
    tloss = _rope_loss(torch, torch.tensor(x), *tparams, torch.tensor(fc))
    tloss.backward()
    assert_close(loss, tloss, 1e-5, 1e-5)
    for p, tp in zip(params, tparams):
        assert_close(p.grad, tp.grad, 1e-4, 1e-5)
