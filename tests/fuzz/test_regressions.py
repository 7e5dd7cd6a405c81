"""Minimal repros of the bugs the differential fuzzer (test_programs.py) found, each
against torch 2.13. Bugs in areas other items of issue 15 own are strict xfails naming
the item."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.backends import needs_vulkan


def _grads(lib, fn, *values):
    xs = [lib.tensor(v, requires_grad=True) for v in values]
    out = fn(lib, *xs)
    return [
        np.asarray(g)
        for g in lib.autograd.grad(
            out, xs, lib.ones_like(out), allow_unused=True, materialize_grads=True
        )
    ]


def _same_grads(fn, *values):
    for g, tg in zip(_grads(staged, fn, *values), _grads(torch, fn, *values)):
        np.testing.assert_array_equal(g, tg)


@pytest.mark.parametrize("key", [(), Ellipsis, slice(None)], ids=["()", "...", ":"])
def test_setitem_of_a_whole_tensor_with_a_leaf_sends_the_gradient_to_the_leaf(key):
    """``w = x.clone(); w[...] = y`` with y a leaf of w's shape: the write reused y as w's
    new value without a node of its own, so w's gradient went to x instead of y."""

    def fn(lib, x, y):
        w = x.clone()
        w[key] = y
        return w

    shape = () if key == () else (2,)
    _same_grads(fn, np.zeros(shape), np.ones(shape))


def test_fill_with_a_leaf_tensor_sends_the_gradient_to_the_leaf():
    def fn(lib, x, y):
        w = x.clone()
        w.fill_(y)
        return w

    _same_grads(fn, np.asarray(0.0), np.asarray(1.0))


def test_writing_a_float_into_an_integer_tensor_does_not_make_it_require_grad():
    """``i[0] = x`` (x requires grad) cast x to int64 with a graph node: the int tensor then
    required grad, which torch never lets an integer tensor do."""
    for lib in (staged, torch):
        x = lib.tensor(0.5, requires_grad=True)
        i = lib.tensor([3, 4])
        i[0] = x
        c = lib.zeros(2, dtype=lib.int64)
        c.copy_(x.expand(2))
        assert not i.requires_grad and i.grad_fn is None, lib.__name__
        assert not c.requires_grad, lib.__name__


def test_atan2_gradient_at_the_origin_is_zero():
    """torch defines d atan2(y, x) = 0 at y = x = 0; staged computed 0/0 = NaN."""
    _same_grads(lambda lib, y, x: lib.atan2(y, x), np.zeros(2), np.asarray([0.0, -0.0]))


def test_logsumexp_over_an_empty_dim_is_minus_inf():
    for shape, dim in (((0,), 0), ((2, 0), 1), ((0, 3), 0)):
        got = staged.logsumexp(staged.zeros(*shape), dim).numpy()
        want = torch.logsumexp(torch.zeros(*shape), dim).numpy()
        np.testing.assert_array_equal(got, want)


def _put_repeated(lib, x, v):
    w = x.clone()
    w[1:, lib.tensor([2, 0, 2])] = v  # after a slice, with a repeated index
    w[lib.tensor([0, 0]), lib.tensor([1, 1])] = v[0, :2] * 2
    return w


def _put_repeated_and_grads(x, v):
    out = _put_repeated(staged, x, v)
    return (out, *staged.autograd.grad(out, (x, v), staged.arange(12.0).reshape(3, 4)))


def test_setitem_through_repeated_indices_writes_the_last_value():
    """torch's CPU index_put_ keeps the last of repeated indices (and sends every value its
    gradient); staged added the values up. Compiled, a reduction that keeps the last hit."""
    x, v = np.zeros((3, 4)), np.arange(1.0, 7.0).reshape(2, 3)
    want = _put_repeated(torch, torch.tensor(x), torch.tensor(v)).numpy()
    np.testing.assert_array_equal(_put_repeated(staged, staged.tensor(x), staged.tensor(v)), want)
    _same_grads(_put_repeated, x, v)
    args = [staged.tensor(a, dtype=staged.float32, requires_grad=True) for a in (x, v)]
    got = staged.capture(_put_repeated_and_grads, *args).compile()(*args)
    for g, e in zip(got, _put_repeated_and_grads(*args)):
        np.testing.assert_array_equal(np.asarray(g.detach()), np.asarray(e.detach()))


def _empty_slices(x, y):
    w = y.clone()
    w[1:] = 5.0
    w[:, 2:] = 3.0
    return x[1:] * 2, x[1::2], y[:, 2:] + 1, w


def test_compiled_slice_past_the_end_of_a_small_dim_is_empty():
    """``x[1:]`` of a size-1 dim (offset 1 in a dim of size 1) failed MLIR's verifier:
    LoweringError 'slice ... offset 0 is out-of-bounds: 1 >= 1' (found by test_programs)."""
    args = staged.ones(1), staged.ones(1, 2)
    got = staged.capture(_empty_slices, *args).compile()(*args)
    for g, e in zip(got, _empty_slices(*args)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))


def test_batch_norm_of_an_empty_batch_is_empty_and_keeps_the_running_stats():
    """found by test_nn_sweep.py: a 0-size batch raised 'Expected more than 1 value per
    channel'; torch returns an empty output and counts the batch."""
    for lib in (staged, torch):
        m = lib.nn.BatchNorm2d(3)
        m.running_mean.fill_(0.5)
        y = m(lib.zeros(0, 3, 2, 2))
        assert tuple(y.shape) == (0, 3, 2, 2), lib.__name__
        assert m.running_mean.tolist() == [0.5] * 3 and m.running_var.tolist() == [1.0] * 3
        assert m.num_batches_tracked.item() == 1, lib.__name__


@pytest.mark.parametrize("args", [(0, False), (1, True, True), (False,)], ids=str)
@pytest.mark.parametrize("name", ["var", "std"])
def test_var_and_std_take_unbiased_positionally(name, args):
    """torch's ``var(dim, unbiased, keepdim)`` and ``var(unbiased)`` overloads: staged
    refused the first and read ``x.var(False)`` as dim 0 with the unbiased estimate."""

    def fn(lib, x):
        return getattr(x, name)(*args)

    x = np.arange(6.0).reshape(2, 3) ** 2
    np.testing.assert_allclose(fn(staged, staged.tensor(x)), fn(torch, torch.tensor(x)), rtol=1e-14)
    for g, tg in zip(_grads(staged, fn, x), _grads(torch, fn, x)):
        np.testing.assert_allclose(g, tg, rtol=1e-14)


def test_softmax_over_an_empty_dim_is_empty():
    """found by test_nn_sweep.py: Softmax(dim=0) of a (0, 4) batch raised from amax."""
    for dim in (0, 1):
        got = staged.softmax(staged.zeros(0, 4), dim)
        assert tuple(got.shape) == tuple(torch.softmax(torch.zeros(0, 4), dim).shape)


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_unreduced_loss_of_a_k_dim_batch_keeps_the_target_shape(loss):
    """found by test_nn_sweep.py: reduction="none" on an (N, C, d) input returned the
    (N*d,) rows instead of torch's (N, d)."""
    x = np.random.default_rng(0).standard_normal((4, 5, 3)).astype(np.float32)
    t = np.random.default_rng(1).integers(0, 5, (4, 3))
    got = getattr(staged.nn.functional, loss)(staged.tensor(x), staged.tensor(t), reduction="none")
    want = getattr(torch.nn.functional, loss)(torch.tensor(x), torch.tensor(t), reduction="none")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_forward_mode_write_through_a_view_updates_the_base_tangent():
    """found by test_programs.py: the base kept its tangent after a write through a view."""
    import staged.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        x = fwAD.make_dual(staged.tensor(1.0), staged.tensor(1.0))
        base = x.clone()
        base[None].zero_()
        assert fwAD.unpack_dual(base).tangent.item() == 0.0


def test_clamp_jvp_at_a_tie_with_a_tensor_bound_follows_the_bound():
    """found by test_programs.py: clamp(x, min) at x == min carried x's tangent."""
    import staged.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        x = fwAD.make_dual(staged.tensor(0.0), staged.tensor(1.0))
        got = fwAD.unpack_dual(staged.clamp(x, x * 2)).tangent.item()
    _, want = torch.func.jvp(
        lambda t: torch.clamp(t, t * 2), (torch.tensor(0.0),), (torch.tensor(1.0),)
    )
    assert got == want.item()


_SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0], np.float32)


def _assert_identical(got, want):
    """Equal values, NaN positions and signs of zero (a NaN's sign is not compared)."""
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got) & (got == got), np.signbit(want) & (want == want))


@pytest.mark.parametrize("tangents", [(1.0, 1.0), (1.0, None), (None, 1.0)], ids=["both", "x", "y"])
def test_div_jvp_at_zeros_infs_and_nans_matches_torch(tangents):
    """The JVP derived from div's VJP gave NaN where torch has -inf (1 / 0, tangents 1):
    tx/y - ty*x/y^2 is inf - inf there, where torch computes (tx - out*ty) / y."""
    import staged.autograd.forward_ad as fwAD

    x, y = (a.ravel() for a in np.meshgrid(_SPECIAL, _SPECIAL))
    tx, ty = (None if t is None else np.full_like(x, t) for t in tangents)
    with fwAD.dual_level():
        dual = [
            staged.tensor(v) if t is None else fwAD.make_dual(staged.tensor(v), staged.tensor(t))
            for v, t in ((x, tx), (y, ty))
        ]
        got = fwAD.unpack_dual(dual[0] / dual[1]).tangent.numpy()
    with torch.autograd.forward_ad.dual_level():
        dual = [
            torch.tensor(v)
            if t is None
            else torch.autograd.forward_ad.make_dual(torch.tensor(v), torch.tensor(t))
            for v, t in ((x, tx), (y, ty))
        ]
        want = torch.autograd.forward_ad.unpack_dual(dual[0] / dual[1]).tangent.numpy()
    _assert_identical(got, want)
    for g, tg in zip(
        _grads(staged, lambda lib, a, b: a / b, x, y), _grads(torch, lambda lib, a, b: a / b, x, y)
    ):
        _assert_identical(g, tg)


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, x, lo, hi: lib.clamp(x, -1.0, 1.0),
        lambda lib, x, lo, hi: lib.clamp(x, min=-1.0),
        lambda lib, x, lo, hi: lib.clamp_max(x, 1.0),
        lambda lib, x, lo, hi: lib.clamp(x, lo, hi),
        lambda lib, x, lo, hi: lib.clamp(x, min=lo),
        lambda lib, x, lo, hi: lib.clamp_max(x, hi),
    ],
    ids=["scalars", "scalar_min", "scalar_max", "tensors", "tensor_min", "tensor_max"],
)
def test_clamp_gradient_at_nan_is_zero(fn):
    """torch's clamp gives x no gradient where x is NaN (it passes x >= min and x <= max
    only); staged's where(x < min, min, x) passed the whole gradient to x there."""
    x = _SPECIAL
    _same_grads(fn, x, np.full_like(x, -1.0), np.full_like(x, 1.0))


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_and_minimum_at_nan_pass_the_gradient_to_both(name):
    """torch's maximum/minimum backward only masks the losing input (and halves at ties),
    so at a NaN both inputs get the whole gradient, and its JVP ty + w * (tx - ty) gives
    ty there; staged gave 0 for both."""
    import staged.autograd.forward_ad as fwAD

    x, y = (a.ravel() for a in np.meshgrid(_SPECIAL, _SPECIAL))
    fn = lambda lib, a, b: getattr(lib, name)(a, b)  # noqa: E731
    for g, tg in zip(_grads(staged, fn, x, y), _grads(torch, fn, x, y)):
        _assert_identical(g, tg)
    tx, ty = np.ones_like(x), np.full_like(y, 2.0)
    with fwAD.dual_level():
        got = fwAD.unpack_dual(
            fn(
                staged,
                fwAD.make_dual(staged.tensor(x), staged.tensor(tx)),
                fwAD.make_dual(staged.tensor(y), staged.tensor(ty)),
            )
        )
    _, want = torch.func.jvp(
        lambda a, b: fn(torch, a, b),
        (torch.tensor(x), torch.tensor(y)),
        (torch.tensor(tx), torch.tensor(ty)),
    )
    _assert_identical(got.tangent.numpy(), want.numpy())


@pytest.mark.parametrize("op", ["mul_", "div_", "add_"])
def test_an_inplace_op_reading_the_written_tensor_captures_with_its_value_before(op):
    """``v = x.clone(); v.mul_(x)`` saves v's value before the write for x's gradient;
    under capture it kept the tensor itself, whose version the write bumped, and backward
    raised "modified by an inplace operation" (only eager kept the old value)."""

    def fn(lib, x):
        v = x.clone()
        getattr(v, op)(x + 1)
        return v * x

    x = np.array([0.5, -2.0, 3.0], np.float32)
    want = _grads(torch, fn, x)
    np.testing.assert_allclose(_grads(staged, fn, x)[0], want[0], rtol=1e-6)

    def step(t):
        return staged.autograd.grad(fn(staged, t), [t], staged.ones_like(t))[0]

    got = staged.compile(step)(staged.tensor(x, requires_grad=True))
    np.testing.assert_allclose(np.asarray(got), want[0], rtol=1e-5)


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, x, b: lib.clamp(x, b),
        lambda lib, x, b: lib.clamp(x, None, b),
        lambda lib, x, b: lib.clamp(x, b, b + 1),
        lambda lib, x, b: lib.clamp(x, float("nan")),
        lambda lib, x, b: lib.clamp_max(x, float("nan")),
    ],
    ids=["tensor_min", "tensor_max", "tensors", "scalar_min", "scalar_max"],
)
def test_clamp_to_a_nan_bound_is_nan(fn):
    """torch's clamp propagates a NaN bound; staged's where(x < min, min, x) kept x there
    (x < NaN is False), a silent wrong value. The gradients stay torch's: none to either
    at a NaN bound."""
    special = np.array([np.nan, 0.0, 1.0, -1.0, 2.5], np.float32)
    x, b = (a.ravel() for a in np.meshgrid(special, special))
    with np.errstate(all="ignore"):
        got = fn(staged, staged.tensor(x), staged.tensor(b)).numpy()
    _assert_identical(got, fn(torch, torch.tensor(x), torch.tensor(b)).numpy())
    for g, tg in zip(_grads(staged, fn, x, b), _grads(torch, fn, x, b)):
        _assert_identical(g, tg)


def _tangent(lib, fn, primals, tangents):
    """The tangent of ``fn`` by ``lib``'s forward AD; a None tangent: a plain tensor."""
    import staged.autograd.forward_ad  # noqa: F401  (lib.autograd.forward_ad)

    fw = lib.autograd.forward_ad
    with fw.dual_level(), np.errstate(all="ignore"):
        args = [
            lib.tensor(p) if t is None else fw.make_dual(lib.tensor(p), lib.tensor(t))
            for p, t in zip(primals, tangents)
        ]
        return fw.unpack_dual(fn(*args)).tangent.numpy()


def test_atan2_jvp_at_the_origin_is_nan():
    """torch's atan2 JVP is (x ty - y tx) / (x^2 + y^2), NaN at the origin though its
    VJP gives 0 there (test_atan2_gradient_at_the_origin_is_zero); staged's tangent was
    derived from its VJP, 0."""
    y, x = (a.ravel() for a in np.meshgrid(_SPECIAL, _SPECIAL))
    ty, tx = np.ones_like(y), np.full_like(x, 2.0)
    for tangents in ((ty, tx), (ty, None), (None, tx)):
        np.testing.assert_array_equal(
            _tangent(staged, staged.atan2, (y, x), tangents),
            _tangent(torch, torch.atan2, (y, x), tangents),
        )


@pytest.mark.parametrize("dtype", ["bool", "int64"])
def test_logsumexp_of_integers_and_bools_is_in_the_default_float(dtype):
    """torch casts an integer or bool input of logsumexp to the default float first;
    staged computed x - max(x) in x's dtype, which raised for bools ("'sub' is not defined
    for bool tensors")."""
    x = np.array([[[False]], [[True]], [[True]]]).astype(dtype)
    got = staged.logsumexp(staged.tensor(x), -1)
    want = torch.logsumexp(torch.tensor(x), -1)
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_write_through_a_view_zeroes_an_infinite_gradient_of_the_overwritten_part():
    """The base's gradient past a write through its view was g - scatter(g's view part):
    inf - inf = NaN in the written part where torch's CopySlices gives 0 (fuzzer:
    ``v = y.clone(); v[None][()] = y; (x.clone().div_(v))`` with x = -inf)."""

    def fn(lib, x, y):
        w = x.clone()
        w[:1].copy_(y)
        return w * float("inf")

    _same_grads(fn, np.array([1.0, 2.0]), np.array(3.0))


def test_onnx_export_of_a_write_through_an_empty_index_runs_in_onnxruntime(tmp_path):
    """The value written through an empty index array is expanded to a zero-size shape;
    onnxruntime's ExpandElimination removed that Expand after an elementwise op, and the
    next Reshape failed ("Input shape:{2,1,1}, requested shape:{2,1,0}")."""
    import onnxruntime as ort

    def fn(lib, x):
        w = x.clone()
        w[:, :, lib.tensor(np.zeros(0, np.int64))] = x.floor()
        return w

    x = np.full((2, 1, 1), 2.5)
    path = str(tmp_path / "f.onnx")
    staged.capture(lambda t: fn(staged, t), staged.tensor(x)).export_onnx(path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x})
    np.testing.assert_array_equal(got, fn(torch, torch.tensor(x)).numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_onnx_atan_and_atan2_at_infinities_and_signed_zeros(dtype, tmp_path):
    """ONNX lowerings vs NumPy (staged's eager): float64 atan is float32's plus a Newton
    step, which near +-pi/2 was off by x times float32's error squared (atan(1e16) = -20,
    atan(-inf) = -inf; fuzzer: atan2(-inf, 2) = -inf); atan2 took y/x = NaN at two
    infinities and x = -0.0 for +0.0."""
    import onnxruntime as ort

    special = np.array([-np.inf, np.inf, 1e30, -1e16, 3.0, 0.5, 0.0, -0.0, -1.0, np.nan], dtype)
    y, x = (a.ravel() for a in np.meshgrid(special, special))
    path = str(tmp_path / "f.onnx")
    staged.capture(
        lambda a, b: (staged.atan2(a, b), staged.atan(a)), staged.tensor(y), staged.tensor(x)
    ).export_onnx(path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {i.name: v for i, v in zip(sess.get_inputs(), (y, x))})
    for g, w in zip(got, (np.arctan2(y, x), np.arctan(y))):
        np.testing.assert_allclose(g, w, rtol=1e-6 if dtype == "float32" else 1e-13)


@needs_vulkan
def test_vulkan_tanh_and_sigmoid_saturate_to_one():
    """lavapipe's tanh stays 2e-7 below 1 for large x, so sigmoid(inf) was 0.9999999 and
    silu's gradient sigmoid (1 + x (1 - sigmoid)) inf at inf (NaN eagerly and in torch)
    and 4e22 at 1e30 (fuzzer: silu of inf on vulkan-spirv)."""

    def step(t):
        (g,) = staged.autograd.grad(staged.nn.functional.silu(t), [t], staged.ones_like(t))
        return t.tanh(), t.sigmoid(), g

    x = staged.tensor(
        np.array([np.inf, -np.inf, 30.0, 1e30, -1e30, 0.5, np.nan], np.float32), requires_grad=True
    )
    with np.errstate(all="ignore"):
        want = step(x)
    got = staged.capture(step, x).compile("vulkan-spirv")(x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g.detach()), w.detach().numpy(), rtol=1e-6)


def test_integer_pow_to_a_negative_exponent_tensor_is_torch_s(tmp_path):
    """torch's integer pow gives +-1 of +-1 and 0 of the rest for a negative exponent;
    staged raised NumPy's ValueError eagerly (fuzzer: pow(x, x) with x = -1), its llvm-cpu
    square-and-multiply wrapped (3 ** -1 odd garbage) and onnxruntime gave 0 ** -1 the
    lowest int64."""
    import onnxruntime as ort

    x = np.repeat(np.arange(-3, 4), 4)
    y = np.tile(np.arange(-3, 1), 7)
    want = torch.pow(torch.tensor(x), torch.tensor(y)).numpy()
    args = staged.tensor(x), staged.tensor(y)
    np.testing.assert_array_equal(staged.pow(*args).numpy(), want)
    cap = staged.capture(staged.pow, *args)
    np.testing.assert_array_equal(np.asarray(cap.compile("llvm-cpu")(*args)), want)
    path = str(tmp_path / "pow.onnx")
    cap.export_onnx(path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {i.name: v for i, v in zip(sess.get_inputs(), (x, y))})
    np.testing.assert_array_equal(got, want)


def test_onnx_write_into_a_bool_tensor_through_an_index_array_runs(tmp_path):
    """The scatter lowering selected with a bool Where, which onnxruntime has no kernel
    for (NOT_IMPLEMENTED: 'Could not find an implementation for Where(16)')."""
    import onnxruntime as ort

    def fn(lib, x, v):
        w = x.clone()
        w[lib.tensor([-1])] = v
        return w

    x, v = np.array([True, True]), np.array(False)
    path = str(tmp_path / "f.onnx")
    staged.capture(lambda a, b: fn(staged, a, b), staged.tensor(x), staged.tensor(v)).export_onnx(
        path
    )
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), (x, v))})
    np.testing.assert_array_equal(got, fn(torch, torch.tensor(x), torch.tensor(v)).numpy())


def _bool_write_beside_a_zero(x0, x1, c):
    v0 = x1.clone()
    v0.fill_(-0.0)
    w1 = x0.clone()
    w1[None] = v0
    (g,) = staged.autograd.grad([v0], [x1], [c], materialize_grads=True)
    return v0, w1, g


def test_compiled_bool_result_beside_a_constant_float_result():
    """fuzzer: ``v0 = x1.clone(); v0.fill_(-0.0); w1 = x0.clone(); w1[None] = v0`` (x0 a
    bool). IREE hoisted the constant results into globals and fused the i1 global with the
    f64 one: the f64 result read 8 bytes of a 1-byte buffer (OUT_OF_RANGE, a compile error
    or silently +0.0, by pass order); staged now compiles without that hoisting."""
    args = (
        staged.tensor(np.array(True)),
        staged.tensor(-np.inf, requires_grad=True),
        staged.tensor(0.5, dtype=staged.float64),
    )
    want = _bool_write_beside_a_zero(*args)
    got = staged.capture(_bool_write_beside_a_zero, *args).compile("llvm-cpu")(*args)
    for g, w in zip(got, want):
        _assert_identical(np.asarray(g.detach()), w.detach().numpy())


@pytest.mark.parametrize(
    "x", [[1.0, np.inf, 2.0], [-np.inf, 1.0], [np.nan, 1.0, 3.0]], ids=["inf", "-inf", "nan"]
)
def test_var_gradient_beside_an_infinity_is_torch_s(x):
    """torch's var_backward is 2 / (n - 1) * g * (x - mean): -inf at the finite entries
    beside an inf. staged's composite also differentiated through the mean, whose gradient
    (0 in exact arithmetic) is inf - inf = NaN for the whole row. Second order stays
    torch's (the mean still differentiates there)."""
    x = np.array(x)
    _same_grads(lambda lib, t: t.var(0), x)
    w = np.arange(1.0, len(x) + 1)
    for lib in (staged, torch):
        t = lib.tensor(x, requires_grad=True)
        (g,) = lib.autograd.grad(t.var(0), [t], create_graph=True)
        (g2,) = lib.autograd.grad((g * lib.tensor(w)).sum(), [t])
        if lib is staged:
            got = g2.numpy()
    np.testing.assert_allclose(got, g2.numpy(), rtol=1e-14)


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("shape, dim", [((0,), 0), ((2, 0), 1), ((0, 3), 0)], ids=str)
def test_var_and_std_jvp_over_an_empty_dim_is_zero(shape, dim):
    """torch's var JVP sums 2 / (n - 1) * t * (x - mean) over the dim: 0 for an empty one;
    staged's divided the tangent of the sum by n - 1 clamped at 0: 0 / 0 = NaN."""
    p, t = np.zeros(shape), np.ones(shape)
    for name in ("var", "std"):
        got = _tangent(staged, lambda a: getattr(a, name)(dim), (p,), (t,))
        want = _tangent(torch, lambda a: getattr(a, name)(dim), (p,), (t,))
        _assert_identical(got, want)


def test_std_jvp_of_a_constant_is_zero():
    """torch masks std's tangent to 0 where std is 0; staged's sqrt gave 0 / 0 = NaN."""
    p, t = np.full((3, 2), 2.0), np.arange(6.0).reshape(3, 2)
    _assert_identical(
        _tangent(staged, lambda a: a.std(0), (p,), (t,)),
        _tangent(torch, lambda a: a.std(0), (p,), (t,)),
    )


def test_fuzz_oracle_skips_atan2_second_order_at_the_origin():
    """torch's second derivative of atan2 at y = x = 0 is NaN (0 * inf), staged's 0: the
    fuzzer has no oracle there and checks first order only."""
    from tests.fuzz import differential as D
    from tests.fuzz.program import Program, Step

    prog = Program([np.zeros(2)], [Step("op", "atan2", (0, 0))])
    D.check_eager(prog, second_order=True)


def test_llvm_cpu_atan2_at_zeros_and_infinities():
    """IREE's float32 expansion of math.atan2 (atan of y/x, then a quadrant fix-up) gave
    NaN at two zeros and at two infinities, and +pi for a negative y against x = -inf
    (fuzzer: gelu(-0.0), relu_, a setitem, then atan2: a NaN gradient compiled)."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-30, -3e4], np.float32)
    y, x = (a.ravel() for a in np.meshgrid(special, special))
    for dtype in ("float32", "float16", "float64"):
        args = staged.tensor(y.astype(dtype)), staged.tensor(x.astype(dtype))
        got = np.asarray(staged.capture(staged.atan2, *args).compile("llvm-cpu")(*args))
        want = np.arctan2(y.astype(dtype), x.astype(dtype))
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=dtype)
        np.testing.assert_array_equal(
            np.signbit(got) & (got == got), np.signbit(want) & (want == want), err_msg=dtype
        )


def test_onnx_atan2_keeps_the_sign_of_a_zero_y(tmp_path):
    """atan2(-0.0, +0.0) is -0.0; the ONNX lowering selected y with a Where at two zeros,
    and onnxruntime's Where turns a -0.0 taken from its then input into +0.0."""
    import onnxruntime as ort

    y = np.array([-0.0, 0.0, -0.0, 0.0, -0.0], np.float32)
    x = np.array([0.0, 0.0, -0.0, -0.0, 2.0], np.float32)
    path = str(tmp_path / "f.onnx")
    staged.capture(staged.atan2, staged.tensor(y), staged.tensor(x)).export_onnx(path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {i.name: v for i, v in zip(sess.get_inputs(), (y, x))})
    _assert_identical(got, torch.atan2(torch.tensor(y), torch.tensor(x)).numpy())


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "known difference: IREE 3.13's CPU runtime sets MXCSR FTZ|DAZ for every dispatch "
        "(iree_task_worker_main pushes IREE_FPU_STATE_FLAG_FLUSH_DENORMALS_TO_ZERO; local-sync "
        "flushes too; no compiler or runtime flag turns it off), so llvm-cpu steps read and write "
        "float32/float64 subnormals as +-0 (README 'Backends')"
    ),
)
@pytest.mark.parametrize("dtype,device", [("float32", "local-task"), ("float64", "local-sync")])
def test_llvm_cpu_flushes_subnormals_to_zero(dtype, device):
    """sqrt(1e-40) compiled gave 0 (eager and torch: 1e-20) and sqrt(-1e-40) gave -0
    (NaN); 1e-40 * 0.5 gave 0. Normal values and a subnormal passed through unchanged are
    right; only arithmetic in a dispatch flushes."""
    tiny = np.finfo(dtype).smallest_normal / 2**10
    x = staged.tensor(np.array([tiny, -tiny, 4.0], dtype))
    step = staged.compile(lambda a: (a.sqrt(), a * 0.5), backend="llvm-cpu", device=device)
    got = [np.asarray(r) for r in step(x)]
    t = torch.tensor(np.asarray(x))
    for g, w in zip(got, (t.sqrt(), t * 0.5)):
        np.testing.assert_array_equal(g, w.numpy(), err_msg=f"{dtype} on {device}")


def test_llvm_cpu_compiles_an_expanded_slice_returned_twice():
    """Fuzz, session 10: IREE 3.13 made an invalid tensor.extract_slice ('expected rank to
    be smaller or equal to the other rank') of a one-element slice whose unit dims were
    expanded, returned and also cast and collapsed; such reshapes now lower to
    tensor.reshape (emitter.reshape)."""

    def f(x):
        v = x[0:1, 0:1, None]
        return v, v.double().reshape(1, 1)

    x = staged.tensor([[[-2], [1]]])
    for got, want in zip(staged.compile(f)(x), f(x)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@needs_vulkan
def test_vulkan_keeps_nan_through_x_minus_x():
    """Fuzz, session 10: lavapipe folded x - x to 0 (NaN - NaN gave 0); written on the bits
    since (Note [folded zeros] in staged/lower/mlir/elementwise.py)."""
    x = staged.tensor([float("nan"), 1.0])
    got = staged.compile(lambda a: a - a, backend="vulkan-spirv")(x).numpy()
    np.testing.assert_array_equal(got, [float("nan"), 0.0])


@pytest.mark.parametrize(
    "name,kw", [("leaky_relu", {}), ("hardtanh", {"min_val": -0.5, "max_val": 0.5}), ("relu6", {})]
)
def test_second_order_at_a_constant_gradient_is_torchs_zeros(name, kw):
    """Fuzz, session 10: built from where, whose rule does not read x, the first gradient
    of leaky_relu/hardtanh/relu6 at a constant cotangent did not require grad, and the
    second raised 'does not require grad'; torch's fused backward kernels read x (as
    staged's leaky_relu_backward/hardtanh_backward now do), so it is zeros. The kinks and
    either side of them are in x (not NaN: torch's hardtanh gradient there is 1 from its
    scalar kernel, 0 from its vectorized float64 one)."""
    data = [0.0, 0.5, -1.0, -0.5, 6.0, 7.0, -7.0]
    x = staged.tensor(data, dtype=staged.float64, requires_grad=True)
    tx = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    (g,) = staged.autograd.grad(
        getattr(staged.nn.functional, name)(x, **kw).sum(), x, create_graph=True
    )
    (tg,) = torch.autograd.grad(
        getattr(torch.nn.functional, name)(tx, **kw).sum(), tx, create_graph=True
    )
    np.testing.assert_array_equal(g.detach().numpy(), tg.detach().numpy())
    (gg,) = staged.autograd.grad(g.sum(), x)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    np.testing.assert_array_equal(gg.numpy(), tgg.numpy())


def test_leaky_relu_and_hardtanh_of_integers_and_bools_are_torchs():
    """The fused float primitives leave integers to torch's rules: hardtanh and relu6 clamp
    them, leaky_relu and bool inputs raise torch's errors."""
    F, tF = staged.nn.functional, torch.nn.functional
    ints = [-3, 0, 2, 9]
    for name in ("hardtanh", "relu6"):
        got = getattr(F, name)(staged.tensor(ints))
        assert (
            got.dtype == staged.int64
            and got.tolist() == getattr(tF, name)(torch.tensor(ints)).tolist()
        )
        with pytest.raises(RuntimeError, match="Bool inputs not supported for hardtanh"):
            getattr(F, name)(staged.tensor([True, False]))
    with pytest.raises(NotImplementedError, match="\"leaky_relu_cpu\" not implemented for 'Long'"):
        F.leaky_relu(staged.tensor(ints))


def test_division_by_a_tiny_divisor_differentiates_as_torch():
    """x / x at 2e-22 (float32): the divisor's gradient is torch's (x / y) / y; x / (y * y)
    went through a subnormal y * y and summed to 4.7e18 where torch gives -7.0e13
    (fuzzer)."""
    grads = []
    for lib in (staged, torch):
        x = lib.tensor(np.float32(2.0230966478762128e-22), requires_grad=True)
        (x / x).backward()
        grads.append(float(x.grad))
    assert grads[0] == grads[1]


def test_logit_at_0_and_1_has_torchs_infinite_gradient():
    """log(x / (1 - x)) differentiated to NaN at 0 (inf * 0 through the quotient); torch's
    gradient is 1 / (x (1 - x)) (fuzzer)."""
    for v in (0.0, 1.0):
        grads = []
        for lib in (staged, torch):
            x = lib.tensor(v, requires_grad=True)
            lib.logit(x).backward(lib.tensor(-1.0))
            grads.append(float(x.grad))
        assert grads[0] == grads[1] == -np.inf


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_of_a_float_and_an_integer_computes_in_float(name):
    """The float-only check looked at each input, not their promoted dtype, so
    ``logaddexp(float, long)`` raised "not implemented for 'Long'"; torch computes it."""
    x = np.array([0.5, 3.0])
    ours, theirs = (
        _grads(lib, lambda t, x: getattr(t, name)(x, t.tensor([2, -1])), x)
        for lib in (staged, torch)
    )
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-14)  # float64 round-off
    for lib in (staged, torch):
        with pytest.raises(NotImplementedError, match=f"{name}_cpu.*'Long'"):
            getattr(lib, name)(lib.tensor([1]), lib.tensor([2]))


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_second_derivatives_at_ties_are_sigmoids(name):
    """At x == y the max and |x - y| of the overflow-free formula have kinks, so the
    second derivatives came out 0; torch's (and the true) are +-1/4 (times log 2 in base
    2). Values, gradients and second derivatives against torch, at ties and off them,
    with equal infinities still themselves."""
    xs, ys = [0.5, -2.0, 1e300, 3.0, -40.0], [0.5, -2.0, 1e300, 1.0, 0.0]
    got = []
    for lib in (staged, torch):
        x, y = (lib.tensor(v, dtype=lib.float64, requires_grad=True) for v in (xs, ys))
        out = getattr(lib, name)(x, y)
        gx, gy = lib.autograd.grad(out.sum(), (x, y), create_graph=True)
        hxx, hxy = lib.autograd.grad(gx.sum(), (x, y))
        got.append([t.detach().numpy() for t in (out, gx, gy, hxx, hxy)])
    for ours, theirs in zip(*got):
        np.testing.assert_allclose(ours, theirs, rtol=1e-15)
    assert abs(got[0][3][0]) > 0.17  # the tie's second derivative is not 0
    inf = staged.tensor([np.inf, -np.inf])
    np.testing.assert_array_equal(getattr(staged, name)(inf, inf).numpy(), [np.inf, -np.inf])


def test_square_of_a_bool_is_int64():
    """torch squares as ``pow(x, 2)``, which promotes bool to int64; ``x * x`` kept bool."""
    for lib in (staged, torch):
        assert lib.square(lib.tensor([True, False])).tolist() == [1, 0]
        assert lib.square(lib.tensor([True])).dtype == lib.int64


def test_logit_gradient_is_nan_outside_zero_one():
    """logit's value is NaN outside [0, 1] and torch's gradient too; staged's log - log1p
    form gave a finite one (log1p's gradient knows no domain)."""
    x = np.array([2.0, -1.0, 0.5, 0.0, 1.0])
    for eps in (None, 0.1):
        ours, theirs = (_grads(lib, lambda t, v: t.logit(v, eps=eps), x) for lib in (staged, torch))
        np.testing.assert_array_equal(ours[0], theirs[0])


def test_an_integer_tensor_written_with_a_dual_has_no_tangent():
    """``v = bools.clone(); v[()] = dual`` gave v a tangent, so exp(v)'s tangent was t
    (torch: none); an integer or bool result of any op carries no tangent."""
    for lib in (staged, torch):
        fw = lib.autograd.forward_ad
        with fw.dual_level():
            d = fw.make_dual(lib.tensor([0.5]), lib.tensor([1.0]))
            v = lib.tensor([False]).clone()
            v[()] = d
            assert fw.unpack_dual(v).tangent is None
            assert fw.unpack_dual(lib.exp(v)).tangent is None
            assert fw.unpack_dual(d.to(lib.int64)).tangent is None


@pytest.mark.parametrize("p", [1, 2, 3])
def test_mvlgamma_below_its_domain_computes_as_torch(p):
    """torch 2.13's mvlgamma has no domain check (x <= (p - 1) / 2 gives lgamma's values,
    inf at its poles); staged raised "All elements must be greater than (p-1)/2"."""
    x = np.array([-1.0, -0.5, -0.0, 0.0, 0.2, 0.5, 1.0, 1.3, 4.0])
    got = staged.mvlgamma(staged.tensor(x), p).numpy()
    np.testing.assert_allclose(got, torch.mvlgamma(torch.tensor(x), p).numpy(), rtol=1e-13)
    # the gradient at -0.0 is digamma(+0) = -inf, as torch's x + 0 (staged's was +inf)
    (ours,) = _grads(staged, lambda lib, t: lib.mvlgamma(t, p), x)
    (theirs,) = _grads(torch, lambda lib, t: lib.mvlgamma(t, p), x)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_gradient_sums_over_broadcast_dims_after_the_derivative(name):
    """y's gradient g * x / y is summed over the broadcast dims after dividing, as torch:
    an empty x gave y NaN (0 / 0 after summing to 0), x = [0, 1, 0] with y = [0] gave
    inf (torch NaN: 0 / 0 + 1 / 0 + 0 / 0)."""

    def fn(lib, x, y):
        f = lib.xlogy if name == "xlogy" else lib.special.xlog1py
        return f(x, y if name == "xlogy" else y - 1)

    _same_grads(fn, np.zeros(0, np.float32), np.zeros(1, np.float32))
    _same_grads(fn, np.array([0.0, 1.0, 0.0]), np.array([0.0]))
    _same_grads(fn, np.array([[0.5], [2.0]]), np.array([1.0, 3.0, 0.0]))


def test_sinc_derivatives_at_zero():
    """sinc's value, first and second derivatives at 0 are 1, 0 and -pi**2 / 3 (staged's
    second was 0: the constant 1 it picked there has none; torch's is NaN), and near 0
    too (the quotient's second derivative was 2e17 at 6.6e-18)."""
    x = staged.tensor([0.0, 1e-3, 0.5, 6.6e-18, -2e-3], dtype=staged.float64, requires_grad=True)
    y = staged.sinc(x)
    (g,) = staged.autograd.grad(y.sum(), [x], create_graph=True)
    (gg,) = staged.autograd.grad(g.sum(), [x])
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    yt = torch.sinc(xt)
    (gt,) = torch.autograd.grad(yt.sum(), [xt], create_graph=True)
    (ggt,) = torch.autograd.grad(gt.sum(), [xt])
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-15)
    # near 0 both formulas cancel: about eps / (pi x)**2 relative (1e-11 at x = 1e-3)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-9, atol=1e-15)
    assert gg[0].item() == pytest.approx(-(np.pi**2) / 3, rel=1e-15)
    # near 0 torch's cancels (0 at 6.6e-18, where the quotient's gave 1e17): the Taylor
    # form's is -pi**2 / 3 (1 - 0.3 (pi x)**2)
    assert gg[3].item() == pytest.approx(-(np.pi**2) / 3, rel=1e-15)
    np.testing.assert_allclose(gg.numpy()[[1, 2, 4]], ggt.numpy()[[1, 2, 4]], rtol=1e-9)


def test_pow_masks_its_derivatives_before_multiplying_by_the_gradient():
    """x ** x at 0 is 1 and asin's gradient there infinite: torch masks pow's derivatives
    to 0 and then multiplies, inf * 0 = NaN; staged's masked product gave 0."""

    def fn(lib, x):
        return lib.asin(lib.pow(x, x))

    _same_grads(fn, np.zeros(3, np.float32))
    _same_grads(lambda lib, x, y: x**y, np.array([0.0, 2.0, 0.0]), np.array([0.0, 0.0, 2.0]))


def test_pow_base_gradient_is_zero_where_the_exponent_is_zero_whatever_the_gradient():
    """torch's pow_backward_self is where(y == 0, 0, g * y x**(y-1)): a NaN or infinite g
    gives 0 there (staged multiplied a masked derivative by g: NaN). The fuzzer found it as
    a second-order difference of pow(x, y) at x = -1, y = 0, through d/dy's NaN log(-1)."""
    nan_inf = [np.array([np.nan, np.inf, 1.0]), np.array([-1.0, 0.0, 2.0])]
    for fn in (
        lambda lib, x: lib.pow(x, lib.zeros(3)) * lib.tensor(nan_inf[0]),
        lambda lib, x: (x**0.0) * lib.tensor(nan_inf[0]),
    ):
        _same_grads(fn, nan_inf[1])


@pytest.mark.parametrize("p", [3.0, 1.5, 0.5, -0.5, -1.0, -2.0])
def test_norm_gradient_at_zero_entries_and_zero_norms_is_torchs(p):
    """torch's norm_backward masks |x|**(p-1) at x == 0 (p < 1) and the scale where the
    norm is 0 (p > 1): 0, where staged's sum(|x|**p)**(1/p) gave 0 * inf = NaN (the
    fuzzer's normalize(x, p=-1) of a zero row)."""
    x = np.array([[0.0, 0.0], [0.0, 1.5], [-2.0, 0.5]])
    for fn in (
        lambda lib, x: x.norm(p=p, dim=1),
        lambda lib, x: lib.nn.functional.normalize(x, p=p),
    ):
        (g,), (tg,) = _grads(staged, fn, x), _grads(torch, fn, x)
        # NaN where torch has NaN, and no more; atol: a cancellation to 0 (2e-16 vs 3e-16)
        np.testing.assert_allclose(g, tg, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
@pytest.mark.parametrize("g", [1.0, 0.0, np.nan, np.inf])
def test_xlogy_gradients_are_torchs_formulas_at_zeros_and_infinities(name, g):
    """torch's d/dx is xlogy(g, y) masked to 0 where x == 0 and y <= 0 (y <= -1 for
    xlog1py), d/dy g x / y: a zero g gives 0 where log y is -inf (staged's composite gave
    0 * -inf = NaN, poisoning masked-out terms of a loss), d/dx at y = inf is inf (was 0),
    and a NaN g stays out of the masked entries. The fuzzer found it through var_mean."""
    x = np.array([0, 0, 0, 0, 1, 0, 2, -1.0])
    y = np.array([0, 0.5, -1, np.nan, 0, np.inf, -1, 1.0]) - (name == "xlog1py")

    def fn(lib, x, y):
        return (lib.xlogy if name == "xlogy" else lib.special.xlog1py)(x, y) * 1.0

    def grads(lib):
        xs = [lib.tensor(v, requires_grad=True) for v in (x, y)]
        out = fn(lib, *xs)
        return [np.asarray(t) for t in lib.autograd.grad(out, xs, lib.full(out.shape, g))] + [
            np.asarray(out.detach())
        ]

    for ours, theirs in zip(grads(staged), grads(torch)):
        np.testing.assert_array_equal(ours, theirs)
        numbers = ~np.isnan(theirs)  # signs of zero too (a NaN's sign bit means nothing)
        np.testing.assert_array_equal(np.signbit(ours[numbers]), np.signbit(theirs[numbers]))


def test_binary_cross_entropy_of_saturated_probabilities_has_torchs_finite_gradient():
    """sigmoid(20.0) is exactly 1 in float32: torch's BCE gradient there is
    g (x - y) / max(x (1 - x), 1e-12), finite; staged's clamped-log chain rule gave
    0 * inf = NaN, which a training step then spread to every weight. Eager and compiled."""
    logits = np.array([20.0, -120.0, 0.3, 20.0, -120.0], np.float32)
    targets = np.array([1.0, 0.0, 1.0, 0.0, 1.0], np.float32)

    def loss(lib, z, t):
        return lib.nn.functional.binary_cross_entropy(lib.sigmoid(z), t)

    def grads(lib, compiled=False):
        z = lib.tensor(logits, requires_grad=True)

        def step(z, t):
            (g,) = lib.autograd.grad(loss(lib, z, t), z)
            return g

        run = lib.compile(step) if compiled else step
        return np.asarray(run(z, lib.tensor(targets)))

    want = grads(torch)
    assert np.isfinite(want).all()
    np.testing.assert_allclose(grads(staged), want, rtol=1e-6)
    np.testing.assert_allclose(grads(staged, compiled=True), want, rtol=1e-5)


@pytest.mark.parametrize("name", ["huber_loss", "smooth_l1_loss"])
def test_huber_gradient_at_an_infinite_difference_is_the_slope(name):
    """An overflowed prediction: torch's gradient is slope * sign(d), finite (Huber's
    point); staged's unselected square gave its zero cotangent times inf = NaN. (At a NaN
    d torch's kernel gives g d = NaN, staged's |d|' = sign(NaN) = 0, as torch's abs.)"""
    x = np.array([np.inf, -np.inf, 0.5, 3.0, -0.0], np.float32)
    _same_grads(lambda lib, x: getattr(lib.nn.functional, name)(x, lib.zeros(5)), x)


def test_index_put_into_a_unit_dim_with_both_gradients_compiles():
    """IREE 3.13 failed to compile this (an unrealized_conversion_cast i64 -> index in LLVM
    translation) while the broadcast ones of backward were a linalg.generic; as a splat
    constant (Note [splat constants]) it compiles, and its gather's sum is evaluated at
    lowering (Note [invariant reductions]: IREE's own gave 1.0 for 2.0)."""
    x = staged.tensor(np.ones((3, 3, 1)), requires_grad=True)
    v = staged.ones((), dtype=staged.float64, requires_grad=True)

    def step(x, v):
        y = x.clone()
        y[staged.tensor([1, 2]), 1] = v
        return staged.autograd.grad(y.sum(), (x, v))

    gx, gv = staged.compile(step)(x, v)
    assert gv.item() == 2.0 and gx.numpy().sum() == 7.0


@pytest.mark.parametrize("shape", [(0, 4), (0, 2, 3)])
def test_group_norm_of_an_empty_batch_is_empty(shape):
    """A batch of 0: the reshape to (0, groups, -1) could not infer -1 and raised, where
    torch returns the empty result (found by the fuzzer)."""
    x = np.zeros(shape, np.float32)
    _same_grads(lambda lib, x: lib.nn.functional.group_norm(x, 2), x)


def test_hardsigmoid_at_nan_has_torchs_zero_gradient_and_tangent():
    """relu6(x + 3) / 6 through hardtanh, whose gradient passes through at NaN (torch's
    too), gave 1 / 6 there; torch's hardsigmoid masks to (-3, 3): 0 (found by the
    forward-mode fuzzer)."""
    x = np.array([np.nan, -3.0, 3.0, 0.5, -4.0], np.float32)
    _same_grads(lambda lib, x: lib.nn.functional.hardsigmoid(x), x)
    with staged.autograd.forward_ad.dual_level():
        d = staged.autograd.forward_ad.make_dual(staged.tensor(x), staged.ones(5))
        t = staged.autograd.forward_ad.unpack_dual(staged.nn.functional.hardsigmoid(d)).tangent
    np.testing.assert_array_equal(t.numpy(), np.array([0, 0, 0, 1 / 6, 0], np.float32))


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_returned_splat_and_a_written_copy_of_it_stay_apart_compiled(dynamic):
    """IREE 3.13 wrote the insert into a clone of a broadcast constant into the returned
    constant too: ``v = x.clone().zero_()`` came back equal to its written copy (found by
    the llvm-cpu fuzzer; Note [splat constants])."""

    def step(y, x):
        v = x.clone()
        v.zero_()
        w = v.clone()
        w[:, 0] = y
        return v, w

    f = staged.compile(step, dynamic=dynamic)
    for n in (3, 4) if dynamic else (3,):
        y, x = staged.ones(n), staged.randn(n, 2)
        v, w = f(y, x)
        np.testing.assert_array_equal(v.numpy(), np.zeros((n, 2), np.float32))
        np.testing.assert_array_equal(w.numpy(), [[1.0, 0.0]] * n)


def test_a_one_wide_strided_slice_and_its_gradient_compile():
    """The fuzzer's ``x[0, ::3, ::2]`` of a (1, 1, 2) tensor beside ``x.squeeze()``, an
    ``any`` and a gather, with gradients: IREE 3.13 failed to compile the copy dispatch of
    a unit slice stepping by 3 and 2 (now emitted stepping by 1, the same window)."""
    from tests.fuzz import differential as D
    from tests.fuzz.program import Program, Step

    prog = Program(
        [np.array([[[False]]]), np.array([[[-2.7558088, -1.5668942]]], np.float32)],
        [
            Step("getitem", "", (1,), (0, slice(None, None, 3), slice(None, None, 2))),
            Step("view", "squeeze", (1,)),
            Step("op", "any", (2,), (0,)),
            Step("getitem", "", (0,), (slice(None), slice(None), np.array([0]))),
        ],
    )
    D.check_compiled([prog], "llvm-cpu")


def test_nextafter_requires_grad_where_only_other_does():
    """torch's result requires grad through ``other`` too (its gradient 0); staged's did
    not, found by the second-order fuzzer (``nextafter(bessel_j0(x), x)``)."""
    for lib in (staged, torch):
        x = lib.tensor([0.0, 1.0], dtype=lib.float64, requires_grad=True)
        v = lib.nextafter(lib.tensor([1.0, 0.0], dtype=lib.float64), x)
        assert v.requires_grad, lib.__name__
        assert v.tolist() == [1 - 2**-53, 5e-324]
        (g,) = lib.autograd.grad(v.sum(), x)
        assert g.tolist() == [0.0, 0.0], lib.__name__


@pytest.mark.parametrize("lib", [torch, staged], ids=["torch", "staged"])
def test_a_write_into_an_empty_view_is_allowed(lib):
    """``w = x.clone()[:, ::1, 1:1]; w[:, idx] = v`` with x empty: NumPy gives a new empty
    array zero strides, which the write took for repeated elements ("more than one element
    of the written-to tensor refers to a single memory location"); torch writes nothing."""
    x = lib.zeros((0, 3, 3), dtype=lib.float64, requires_grad=True)
    v = lib.tensor(0.5, dtype=lib.float64, requires_grad=True)
    w = x.clone()
    w[:, ::1, 1:1][:, lib.tensor([-3, -2, -1])] = v
    w.sum().backward()
    assert tuple(x.grad.shape) == (0, 3, 3)
    assert v.grad.item() == 0.0
    e = lib.zeros(2, 0).expand(2, 0)
    e.add_(1)
    assert tuple(e.shape) == (2, 0)


def test_an_empty_tensor_has_torchs_strides():
    for shape in [(0, 3), (2, 0), (0,), (0, 2, 0, 3), (3, 0, 2)]:
        assert staged.zeros(shape).stride() == torch.zeros(shape).stride(), shape
        assert staged.empty(shape).stride() == torch.empty(shape).stride(), shape
    assert staged.zeros(2, 3)[:, 1:1].stride() == torch.zeros(2, 3)[:, 1:1].stride()


_NO_GRAD_WRITES = {
    "fill_": lambda v, T: v.fill_(1.25),
    "zero_": lambda v, T: v.zero_(),
    "setitem": lambda v, T: v.__setitem__(0, 3.0),
    "setitem_index": lambda v, T: v.__setitem__(T.tensor([0]), 3.0),
    "setitem_mask": lambda v, T: v.__setitem__(T.tensor([True]), 3.0),
    "masked_fill_": lambda v, T: v.masked_fill_(T.tensor([True]), 2.0),
    "copy_": lambda v, T: v.copy_(T.ones(1)),
}


@pytest.mark.parametrize("grad_mode", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("op", list(_NO_GRAD_WRITES))
def test_a_write_to_a_no_grad_view_after_its_base_changed(op, grad_mode):
    """Under no_grad, fill_, zero_, setitem and masked_fill_ on a view made under no_grad,
    after another write to its base, read the view's grad_fn (to name the write's Node),
    which regenerated it and raised torch's "A view was created in no_grad mode" error;
    torch never reads it there. With grad on, both raise it (views/in-place fuzzer)."""
    got = []
    for T in (torch, staged):
        x = T.tensor([0.0]).requires_grad_(True)
        with T.no_grad():
            v = x[...]
            x[None].add_(2)
        try:
            with T.set_grad_enabled(grad_mode):
                _NO_GRAD_WRITES[op](v, T)
        except RuntimeError as e:
            got.append(("raised", "created in no_grad mode" in str(e)))
        else:
            got.append(("wrote", x.detach().tolist()))
    assert got[0] == got[1]
    assert got[0][0] == ("raised" if grad_mode else "wrote")


_PUTS = {
    "index_long_value": (lambda T: T.tensor([0]), lambda T: T.tensor([1])),
    "index_0d_value": (lambda T: T.tensor([0]), lambda T: T.tensor(1.0, dtype=T.float64)),
    "list_index": (lambda T: [0, 1], lambda T: T.tensor([1, 2])),
    "mask_two_values": (lambda T: T.tensor([True, False, True]), lambda T: T.tensor([1, 2])),
    "mask_one_value": (lambda T: T.tensor([True, False, True]), lambda T: T.tensor([7])),
    "mask_0d_value": (lambda T: T.tensor([True, False, True]), lambda T: T.tensor(7)),
    "0d_mask": (lambda T: T.tensor(True), lambda T: T.tensor(1, dtype=T.int64)),
    "0d_int_index": (lambda T: T.tensor(1), lambda T: T.tensor(5)),
    "slice": (lambda T: slice(0, 2), lambda T: T.tensor([1, 2])),
    "int_and_index": (lambda T: (0, T.tensor([1])), lambda T: T.tensor([1])),
    "index_float16": (lambda T: T.tensor([0]), lambda T: T.tensor([1.0], dtype=T.float16)),
}


@pytest.mark.parametrize("case", list(_PUTS))
def test_setitem_of_a_value_of_another_dtype_is_refused_where_torch_refuses_it(case):
    """``x[index] = value`` with a tensor value of another dtype: torch refuses it where it
    reaches index_put_ (an index of tensors or sequences), except a one-element value
    filling one bool mask, and casts it elsewhere (a copy_); staged cast it everywhere
    (views/in-place fuzzer: a complex 0-d tensor given a float32 value under a 0-d mask)."""
    got = []
    for T in (torch, staged):
        x = T.zeros(2, 3) if case == "int_and_index" else T.zeros(3)
        index, value = (f(T) for f in _PUTS[case])
        try:
            x[index] = value
        except RuntimeError as e:
            assert "Index put requires the source and destination dtypes match" in str(e)
            got.append("refused")
        else:
            got.append(x.tolist())
    assert got[0] == got[1]


@pytest.mark.parametrize("value", [float("nan"), 5.0, float("-inf")])
def test_a_returned_splat_of_nan_and_a_written_copy_of_it_stay_apart_compiled(value):
    """The same IREE 3.13 miscompile as above with a NaN fill: the splat analysis compared
    entries with ==, so a splat of NaN was not known as one and reached IREE as a select of
    constants, which it folded into a splat and wrote through: ``v1`` came back as its
    written copy and the copy as zeros (llvm-cpu and vulkan-spirv; program fuzzer)."""

    def step(x0, x2):
        v1 = x2.clone()
        v1[None].fill_(value)
        v3 = v1.clone()
        v3[-1] = x0
        return v1, v3

    x0, x2 = staged.tensor([1]), staged.tensor([[-0.0], [-0.0]])
    want = [t.numpy() for t in step(x0, x2)]
    got = [t.numpy() for t in staged.compile(step)(x0, x2)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


_CONJ_CHAINS = {
    "view of detach": lambda x: x.conj().detach().squeeze(0),
    "slice of detach": lambda x: x.conj().detach()[1:],
    "view of .data": lambda x: x.conj().data.view(2),
    "conj of detach": lambda x: x.conj().detach().conj(),
    "conj of a view of .data": lambda x: x.conj().data[None].conj()[0],
}


@pytest.mark.parametrize("chain", sorted(_CONJ_CHAINS))
def test_views_of_a_detached_conj_view_keep_its_conjugate_bit(chain):
    """``is_conj()`` counted only a view's own conj steps, so a view of ``x.conj().detach()``
    said False (torch: True) and ``numpy()`` gave it out; writes through it already reached
    ``x`` conjugated (views/in-place fuzzer)."""
    got = []
    for T in (torch, staged):
        x = T.tensor(np.array([1 + 2j, 3 - 1j], np.complex64))
        v = _CONJ_CHAINS[chain](x)
        try:
            v.numpy()
            refused = False
        except RuntimeError as e:
            assert "conjugate bit" in str(e)
            refused = True
        v.mul_(2)
        got.append((v.is_conj(), refused, v.resolve_conj().tolist(), x.tolist()))
    assert got[1] == got[0]


@pytest.mark.parametrize(
    "key",
    [
        (0, slice(0, 2)),
        (0, slice(0, 5)),
        (0, slice(None)),
        (0, slice(-2, None)),
        (0, slice(-5, 5)),
        (None, 0, slice(-2, 2)),
        (slice(-3, None), 0),
    ],
    ids=repr,
)
def test_a_whole_dims_slice_from_a_given_start_names_the_grad_fn_as_torch(key):
    """torch skips a slice covering a whole dim inside a tuple only when its start is 0 or
    not given: ``x[0, -2:]`` of a (3, 2) ``x`` is a ``SliceBackward0`` there, was a
    ``SelectBackward0`` here (views/in-place fuzzer)."""
    names = [
        type(lib.zeros(3, 2, requires_grad=True)[key].grad_fn).__name__ for lib in (staged, torch)
    ]
    assert names[0] == names[1]


@pytest.mark.parametrize("index", [None, 0, (slice(None), None), (Ellipsis,), slice(None)])
def test_setitem_into_a_stale_view_checks_it_as_torch(index):
    """``v[None] = 0.5`` after ``x.add_(y)`` made the base of ``v`` require grad raised "a leaf
    Variable that requires grad ..." here: torch writes into the view ``v[None]``, whose
    creation regenerates ``v``'s grad_fn first; ``v[...]`` and ``v[:]`` write into ``v``
    itself and raise in both (views/in-place fuzzer)."""
    got = []
    for T in (staged, torch):
        x = T.zeros(2)
        v = x.view(2)
        x.add_(T.ones(2, requires_grad=True))
        try:
            v[index] = 0.5
            got.append(("written", x.tolist(), type(v.grad_fn).__name__))
        except RuntimeError as e:
            assert "a leaf Variable that requires grad" in str(e)
            got.append("refused")
    assert got[0] == got[1]


def test_fill_of_an_expanded_view_with_a_tensor_value_is_refused_as_torch():
    """torch fills an expanded view with a number, but refuses a 0-d tensor value (internal
    overlap); staged filled it (views/in-place fuzzer)."""
    for T in (staged, torch):
        b = T.zeros(2)
        b.expand(2, 2).fill_(3.0)
        assert b.tolist() == [3.0, 3.0]
        with pytest.raises(RuntimeError, match="more than one element of the written-to"):
            b.expand(2, 2).fill_(T.tensor(4.0))
        assert b.tolist() == [3.0, 3.0]


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_of_a_bool_operand_is_promoted(name):
    """``logaddexp(x, mask)`` raised staged's bool-subtraction error: torch promotes the
    bool operand (program fuzzer)."""
    got = []
    for T in (staged, torch):
        x, y = T.tensor([1.8478, -0.5]), T.tensor([[True], [False]])
        got.append((getattr(T, name)(x, y).tolist(), getattr(T, name)(y, x).tolist()))
    np.testing.assert_allclose(got[0], got[1], rtol=1e-6)


@needs_vulkan
def test_an_integer_sum_over_an_empty_dim_compiles_on_vulkan():
    """IREE crashed compiling the overflow check (Note [int64 held in int32]) of an integer
    sum or product over no entries on vulkan-spirv (``x.sum(-1)`` of an empty int64 ``x``;
    program fuzzer): such a reduction has nothing to check."""
    x = staged.zeros(2, 0, dtype=staged.int64)
    y = staged.zeros(0, 3, dtype=staged.int32)

    def f(x, y):
        return x.sum(-1), x.prod(1), y.sum(0), y.sum()

    got = staged.compile(f, backend="vulkan-spirv")(x, y)
    for g, w in zip(got, f(x, y)):
        assert g.dtype == w.dtype and g.tolist() == w.tolist()


# --- session 51's fuzzing: masked gradients, overwritten histories, empty chunks ----------


@pytest.mark.parametrize("name", ["softshrink", "hardswish", "hardshrink", "hardsigmoid"])
def test_a_masked_activation_gives_zero_where_torch_does_whatever_comes_in(name):
    """The band's gradient is 0 for a NaN or inf cotangent too (torch: where(mask, grad,
    0)); through ``x * 0`` it was NaN, and softshrink(x).sqrt() at the band gave NaN."""
    xs = np.array([-4.0, -3.0, 0.0, 0.3, 3.0, 4.0], np.float32)
    got = []
    for lib in (staged, torch):
        f = getattr(lib.nn.functional, name)
        x = lib.tensor(xs, requires_grad=True)
        (g,) = lib.autograd.grad(f(x), x, lib.full((6,), float("nan")))
        y = lib.tensor([0.2, 1.0, -4.0], requires_grad=True)
        f(y).abs().sqrt().sum().backward()
        got.append((g.numpy(), y.grad.numpy()))
    for a, b in zip(*got):  # NaN where torch's is, and float32 rounding apart elsewhere
        np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize(
    "overwrite",
    [
        lambda h, s: h.copy_(s),
        lambda h, s: h.__setitem__(slice(None), s),
        lambda h, s: h.__setitem__(Ellipsis, s),
        lambda h, s: h.__setitem__(None, s),
        lambda h, s: h.fill_(s[0]),
    ],
    ids=["copy_", "[:]", "[...]", "[None]", "fill_"],
)
def test_a_history_overwritten_whole_keeps_its_zero_gradient(overwrite):
    """torch's CopyBackwards keeps the edge to what ``h`` was: ``w.grad`` is zeros, not
    None, so SGD's weight decay still moves ``w`` (staged left it where it was)."""
    out = []
    for lib in (staged, torch):
        w = lib.nn.Parameter(lib.tensor([1.0, 2.0, 3.0]))
        s = lib.tensor([4.0, 5.0, 6.0], requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1, weight_decay=0.5)
        h = w * 2
        overwrite(h, s)
        (h * h).sum().backward()
        opt.step()
        out.append((w.grad.numpy(), w.detach().numpy(), s.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_chunk_of_an_empty_dim_gives_chunks_empty_pieces_and_a_scalar_raises():
    assert [tuple(t.shape) for t in staged.zeros(0, 3).chunk(3)] == [(0, 3)] * 3
    with pytest.raises(RuntimeError, match="chunk expects at least a 1-dimensional tensor"):
        staged.tensor(1.0).chunk(2)


def _written_view(lib, x, c):
    v = x[None, 1:3]  # a view of the argument, returned
    w = v.clone()
    w[:, 0] = 5.0  # a write into the clone only
    (g,) = lib.autograd.grad(v, x, c)
    return v, w, g


@pytest.mark.parametrize("backend", ["llvm-cpu", pytest.param("vulkan-spirv", marks=needs_vulkan)])
def test_a_returned_value_written_into_elsewhere_keeps_its_values_compiled(backend):
    """Note [written results] in lower/mlir/module.py: IREE 3.13 wrote the clone's
    insert_slice into the buffer of the returned view (v came back [[5, 2]])."""
    want = [
        t.detach().numpy()
        for t in _written_view(
            torch, torch.tensor([0.0, 1.0, 2.0], requires_grad=True), torch.ones(1, 2)
        )
    ]
    x = staged.tensor([0.0, 1.0, 2.0], requires_grad=True)
    got = staged.compile(lambda x, c: _written_view(staged, x, c), backend=backend)(
        x, staged.ones(1, 2)
    )
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.detach().numpy(), w)
