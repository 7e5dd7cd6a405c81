"""What a fourth hunt through public PyTorch programs found missing, against torch 2.13:
torch's top-level in-place functions (``torch.exp_(x)`` is ``x.exp_()``), ``nn.functional``'s
in-place activations, torch's top-level dropouts and ``torch.embedding``, softmax's ``dtype``
and implicit dim, torch's keyword names of sizes and dims (``x.flip(dims=...)``), NumPy's
``axis``/``keepdims``, memory formats, ``Embedding``'s ``max_norm`` and
``scale_grad_by_freq``, the error of indices that don't broadcast, ``histogram``'s default
bins and ``max_pool2d`` under ``vmap``."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, both, message

# --- torch.<op>_(x, ...): the Tensor method itself ------------------------------------------------
UNARY = (
    "abs_ acos_ arccos_ asin_ arcsin_ atan_ arctan_ atanh_ arctanh_ ceil_ cos_ cosh_ "
    "deg2rad_ erf_ erfc_ exp2_ exp_ expm1_ fix_ floor_ frac_ i0_ log10_ log1p_ log2_ log_ "
    "logit_ nan_to_num_ neg_ negative_ rad2deg_ reciprocal_ round_ rsqrt_ sigmoid_ sin_ "
    "sinc_ sinh_ sqrt_ square_ tan_ tanh_ trunc_ zero_ asinh_ arcsinh_ conj_physical_"
).split()
# name: (input, arguments), as a function of the library
OTHERS = {
    "acosh_": (lambda t: t.rand(3, 4) + 1, lambda t: ()),
    "arccosh_": (lambda t: t.rand(3, 4) + 1, lambda t: ()),
    "clamp_": (lambda t: t.randn(3, 4), lambda t: (-0.5, 0.5)),
    "clip_": (lambda t: t.randn(3, 4), lambda t: (-0.5, 0.5)),
    "clamp_min_": (lambda t: t.randn(3, 4), lambda t: (0.1,)),
    "clamp_max_": (lambda t: t.randn(3, 4), lambda t: (0.1,)),
    "fill_": (lambda t: t.randn(3, 4), lambda t: (2.5,)),
    "xlogy_": (lambda t: t.rand(3, 4), lambda t: (t.rand(3, 4) + 0.5,)),
    "ldexp_": (lambda t: t.randn(3, 4), lambda t: (t.tensor([1.0, 2.0, -1.0, 0.0]),)),
    "gcd_": (lambda t: t.tensor([12, 18, 7]), lambda t: (t.tensor([8, 12, 21]),)),
    "lcm_": (lambda t: t.tensor([4, 6, 7]), lambda t: (t.tensor([6, 4, 3]),)),
    "addmv_": (lambda t: t.randn(3), lambda t: (t.randn(3, 4), t.randn(4))),
    "index_put_": (
        lambda t: t.zeros(5),
        lambda t: ((t.tensor([0, 3]),), t.tensor([1.5, -2.0])),
    ),
    "detach_": (lambda t: t.randn(3), lambda t: ()),
    "resize_as_": (lambda t: t.randn(2, 3), lambda t: (t.randn(3, 2),)),
    "celu_": (lambda t: t.randn(3, 4), lambda t: (0.7,)),
    "selu_": (lambda t: t.randn(3, 4), lambda t: ()),
    "threshold_": (lambda t: t.randn(3, 4), lambda t: (0.1, 20.0)),
    "rrelu_": (lambda t: t.randn(3, 4), lambda t: (0.1, 0.3, False)),
    "relu_": (lambda t: t.randn(3, 4), lambda t: ()),
}
INPLACE = UNARY + list(OTHERS)


def test_every_ordinary_in_place_function_of_torch_is_there():
    missing = [
        n
        for n in dir(torch)
        if n.endswith("_") and not n.startswith("_") and not hasattr(staged, n)
    ]
    # sparse resizing and strided self-views, which staged's tensors don't have
    assert sorted(missing) == ["as_strided_", "resize_as_sparse_"]


@pytest.mark.parametrize("name", INPLACE)
def test_an_in_place_function_writes_its_input_as_torch_does(name):
    make, args = OTHERS.get(name, (lambda t: t.rand(3, 4) * 0.8 + 0.1, lambda t: ()))
    out = {}
    for lib in (staged, torch):
        lib.manual_seed(0)
        x = make(lib)
        a = args(lib)
        v = x._version
        r = getattr(lib, name)(x, *a)
        assert r is x
        assert x._version == v + (name != "detach_")  # detach_ changes no data
        out[lib] = x
    assert_close(out[staged], out[torch], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", [n for n in INPLACE if hasattr(staged.Tensor, n)])
def test_a_top_level_in_place_function_is_the_tensor_method(name):
    # the same op: the same version bump, the same autograd checks
    if name in ("celu_", "selu_", "threshold_", "rrelu_", "relu_"):
        assert getattr(staged, name) is getattr(staged.nn.functional, name)
    else:
        assert getattr(staged, name) is getattr(staged.Tensor, name)


@pytest.mark.parametrize(
    "call",
    [
        lambda t, x: t.sigmoid_(x),
        lambda t, x: t.exp_(x),
        lambda t, x: t.clamp_(x, 0.0, 1.0),
        lambda t, x: t.selu_(x),
        lambda t, x: t.threshold_(x, 0.0, 1.0),
        lambda t, x: t.nn.functional.elu_(x),
        lambda t, x: t.nn.functional.leaky_relu_(x, 0.2),
        lambda t, x: t.nn.functional.hardtanh_(x),
        lambda t, x: t.dropout_(x, 0.5, True),
    ],
)
def test_in_place_on_a_leaf_that_requires_grad_raises_as_torch(call):
    for lib in (staged, torch):
        x = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            call(lib, x)


@pytest.mark.parametrize(
    "call",
    [
        lambda t, h: t.sigmoid_(h),
        lambda t, h: t.tanh_(h),
        lambda t, h: t.exp_(h),
        lambda t, h: t.sqrt_(t.abs_(h)),
        lambda t, h: t.clamp_(h, -0.3, 0.4),
        lambda t, h: t.celu_(h, 0.5),
        lambda t, h: t.nn.functional.elu_(h, 0.7),
        lambda t, h: t.nn.functional.leaky_relu_(h, 0.2),
        lambda t, h: t.nn.functional.hardtanh_(h, -0.5, 0.5),
        lambda t, h: t.nn.functional.threshold_(h, 0.1, -1.0),
    ],
)
def test_in_place_on_an_intermediate_gives_torch_gradients(call):
    grads, outs = [], []
    for lib in (staged, torch):
        lib.manual_seed(0)
        w = lib.randn(4, 5, requires_grad=True)
        h = w * 1.5
        y = call(lib, h)
        assert y is h
        (y * lib.arange(20.0).reshape(4, 5)).sum().backward()
        grads.append(w.grad)
        outs.append(y.detach())
    assert_close(outs[0], outs[1], rtol=1e-6, atol=1e-7)
    assert_close(grads[0], grads[1], rtol=1e-5, atol=1e-6)


def test_a_saved_tensor_written_by_an_in_place_function_fails_backward_as_torch():
    for lib in (staged, torch):
        w = lib.randn(3, requires_grad=True)
        h = w * 2
        y = h.sin()  # saves h
        lib.exp_(h)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


# --- torch's top-level dropouts and embedding ---------------------------------------------------
@pytest.mark.parametrize(
    "name", ["dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout"]
)
@pytest.mark.parametrize("inplace", [False, True])
def test_top_level_dropouts_draw_torch_masks(name, inplace):
    out = []
    for lib in (staged, torch):
        lib.manual_seed(3)
        x = lib.randn(4, 3, 5)
        v = x._version
        r = getattr(lib, name + "_" * inplace)(x, 0.4, True)
        assert (r is x) == inplace and (x._version > v) == inplace  # torch's alpha: 2 writes
        out.append(r)
        assert getattr(lib, name)(x, 0.4, False) is x  # not training: the input itself
    assert_close(out[0], out[1], rtol=1e-6, atol=1e-7)


def test_feature_dropout_needs_two_dims_as_torch():
    for lib in (staged, torch):
        with pytest.raises(RuntimeError, match="at least 2 dimensions"):
            lib.feature_dropout(lib.ones(3), 0.5, True)


def test_torch_embedding_takes_the_weight_first_and_a_negative_padding_idx_for_none():
    w, idx = np.random.default_rng(0).standard_normal((5, 3)), [[0, 4, 4], [2, 0, 1]]
    grads = []
    for lib in (staged, torch):
        wt = lib.tensor(w, requires_grad=True)
        out = lib.embedding(wt, lib.tensor(idx), padding_idx=-1)
        (out * lib.arange(18.0, dtype=lib.float64).reshape(2, 3, 3)).sum().backward()
        grads.append(wt.grad)
        out = lib.embedding(wt, lib.tensor(idx), padding_idx=4)
        (out.sum()).backward()
        grads.append(wt.grad)
    assert_close(grads[0], grads[2])
    assert_close(grads[1], grads[3])


def test_embedding_max_norm_renormalizes_the_weight_in_place_as_torch():
    res = []
    for lib in (staged, torch):
        lib.manual_seed(0)
        emb = lib.nn.Embedding(10, 4, max_norm=1.0, norm_type=1.5)
        v = emb.weight._version
        idx = lib.tensor([[1, 2, 3, 3], [3, 5, 1, 9]])
        out = emb(idx)
        assert emb.weight._version == v + 1
        (out * lib.arange(32.0).reshape(2, 4, 4)).sum().backward()
        res.append((out.detach(), emb.weight.detach(), emb.weight.grad))
    for a, b in zip(*res):
        assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_embedding_scale_grad_by_freq_divides_each_rows_gradient_by_its_count():
    res = []
    for lib in (staged, torch):
        lib.manual_seed(0)
        emb = lib.nn.Embedding(10, 4, scale_grad_by_freq=True, padding_idx=2)
        idx = lib.tensor([[1, 2, 3, 3], [3, 5, 1, 9]])
        out = emb(idx)
        (out * lib.arange(32.0).reshape(2, 4, 4)).sum().backward()
        res.append((out.detach(), emb.weight.grad))
    # one float32 rounding per summed occurrence: the sums' orders may differ
    assert_close(res[0][0], res[1][0])
    assert_close(res[0][1], res[1][1], rtol=1e-6, atol=1e-6)


def test_embedding_renorm_scales_only_the_rows_picked_above_max_norm():
    w = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32) * 2
    out = []
    for lib in (staged, torch):
        wt = lib.tensor(w)
        assert lib.embedding_renorm_(wt, lib.tensor([0, 4, 4, 5]), 0.5, 1.0) is wt
        out.append(wt)
    assert_close(out[0], out[1], rtol=1e-6, atol=1e-7)
    for lib in (staged, torch):
        with pytest.raises(RuntimeError, match="Long, Int"):
            lib.embedding_renorm_(lib.ones(3, 2), lib.tensor([0.0]), 1.0, 2.0)


# --- softmax: dtype and torch's implicit dim ------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda t, x: t.softmax(x, 1, t.float64),
        lambda t, x: t.log_softmax(x, -1, dtype=t.float64),
        lambda t, x: x.softmax(0, dtype=t.float64),
        lambda t, x: x.log_softmax(dim=2, dtype=t.float64),
        lambda t, x: t.nn.functional.softmax(x, dim=-1, dtype=t.float64),
        lambda t, x: t.nn.functional.log_softmax(x, 1, dtype=t.float64),
        lambda t, x: t.special.softmax(x, 0, dtype=t.float64),
    ],
)
def test_softmax_with_a_dtype_computes_in_it_and_returns_it(call):
    res = []
    for lib in (staged, torch):
        lib.manual_seed(0)
        x = lib.randn(2, 3, 4, requires_grad=True)
        y = call(lib, x)
        assert y.dtype == lib.float64
        (y * lib.arange(24.0, dtype=lib.float64).reshape(2, 3, 4)).sum().backward()
        assert x.grad.dtype == lib.float32
        res.append((y.detach(), x.grad))
    for a, b in zip(*res):
        assert_close(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
def test_softmax_without_dim_picks_torchs_legacy_dim_and_warns_at_the_call(name, ndim):
    res = []
    for lib in (staged, torch):
        lib.manual_seed(0)
        x = lib.randn(*(2, 3, 4, 5)[:ndim])
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            res.append(getattr(lib.nn.functional, name)(x))
        (warned,) = w
        assert f"Implicit dimension choice for {name}" in str(warned.message)
        assert warned.filename == __file__
    assert_close(res[0], res[1], rtol=1e-6, atol=1e-7)


# --- torch's keyword names of sizes and dims; NumPy's axis and keepdims --------------------------
KEYWORDS = {
    "flip(dims=)": lambda t, x: x.flip(dims=(0, 2)),
    "torch.flip(dims=)": lambda t, x: t.flip(x, dims=[1]),
    "permute(dims=)": lambda t, x: x.permute(dims=(2, 0, 1)),
    "torch.permute(dims=)": lambda t, x: t.permute(x, dims=(1, 2, 0)),
    "reshape(shape=)": lambda t, x: x.reshape(shape=(6, 4)),
    "torch.reshape(shape=)": lambda t, x: t.reshape(x, shape=(-1,)),
    "view(size=)": lambda t, x: x.view(size=(4, 6)),
    "expand(size=)": lambda t, x: x[:1].expand(size=(3, 3, 4)),
    "repeat(repeats=)": lambda t, x: x.repeat(repeats=(1, 2, 1)),
    "broadcast_to(size=)": lambda t, x: t.broadcast_to(x, size=(2, 2, 3, 4)),
    "sum(axis=, keepdims=)": lambda t, x: x.sum(axis=1, keepdims=True),
    "torch.mean(axis=)": lambda t, x: t.mean(x, axis=(0, 2)),
    "amax(axis=)": lambda t, x: x.amax(axis=-1, keepdims=True),
    "max(axis=)": lambda t, x: x.max(axis=1).values,
    "argmax(axis=)": lambda t, x: x.amax(2) * x.argmax(axis=2),
    "std(axis=)": lambda t, x: x.std(axis=0),
    "cumsum(axis=)": lambda t, x: x.cumsum(axis=1),
    "logsumexp(axis=)": lambda t, x: x.logsumexp(axis=2),
    "softmax(axis=)": lambda t, x: x.softmax(axis=-1),
    "cat(axis=)": lambda t, x: t.cat([x, x], axis=1),
    "stack(axis=)": lambda t, x: t.stack([x, x], axis=2),
    "concat(axis=)": lambda t, x: t.concat([x, x], axis=0),
    "unsqueeze(axis=)": lambda t, x: x.unsqueeze(axis=1),
    "gather(axis=)": lambda t, x: x.gather(axis=2, index=t.zeros(2, 3, 1, dtype=t.int64)),
}


@pytest.mark.parametrize("name", KEYWORDS)
def test_keyword_forms_give_torchs_values_and_gradients(name):
    res = []
    for lib in (staged, torch):
        lib.manual_seed(0)
        x = lib.randn(2, 3, 4, requires_grad=True)
        y = KEYWORDS[name](lib, x)
        y.sum().backward()
        res.append((y.detach(), x.grad))
    for a, b in zip(*res):
        assert_close(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "call",
    [
        lambda t, x: x.reshape(3, shape=(3, 8)),
        lambda t, x: x.sum(axis=1, dim=1),
    ],
)
def test_sizes_given_twice_raise_a_type_error_as_torch(call):
    for lib in (staged, torch):
        with pytest.raises(TypeError):
            call(lib, lib.ones(2, 3, 4))


def test_a_view_as_its_own_dtype_is_an_alias_outside_the_graph_as_torchs():
    for lib in (staged, torch):
        x = lib.randn(3, requires_grad=True)
        y = x.view(lib.float32)
        assert not y.requires_grad and y.grad_fn is None and y is not x
        z = lib.zeros(3)
        z.view(dtype=lib.float32)[0] = 5.0
        assert z[0].item() == 5.0


# --- memory formats -------------------------------------------------------------------------------
FORMATS = ["contiguous_format", "preserve_format", "channels_last", "channels_last_3d"]


@pytest.mark.parametrize("name", FORMATS)
def test_memory_formats_exist_print_and_pickle_as_torchs(name):
    fmt = getattr(staged, name)
    assert isinstance(fmt, staged.memory_format)
    assert repr(fmt) == repr(getattr(torch, name))
    assert pickle.loads(pickle.dumps(fmt)) is fmt


@pytest.mark.parametrize("name", ["contiguous_format", "preserve_format", "channels_last"])
def test_clone_and_contiguous_in_a_memory_format_give_the_same_values(name):
    res = []
    for lib in (staged, torch):
        lib.manual_seed(0)
        x = lib.randn(2, 3, 4, 5, requires_grad=True)
        fmt = getattr(lib, name)
        y = x.clone(memory_format=fmt) * 2 + lib.clone(x, memory_format=fmt)
        z = (x * 1).contiguous(memory_format=fmt)
        (y * z).sum().backward()
        res.append(((y * z).detach(), x.grad))
    for a, b in zip(*res):
        assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_channels_last_needs_four_dims_as_torch():
    for lib in (staged, torch):
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last"):
            lib.ones(2, 3).contiguous(memory_format=lib.channels_last)
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last"):
            lib.ones(2, 3).clone(memory_format=lib.channels_last)


def test_is_contiguous_reads_the_strides_for_a_memory_format():
    for lib in (staged, torch):
        nhwc = lib.randn(2, 4, 5, 3).permute(0, 3, 1, 2)  # NCHW values, NHWC layout
        assert nhwc.is_contiguous(memory_format=lib.channels_last)
        assert not nhwc.is_contiguous()
        assert not nhwc.is_contiguous(memory_format=lib.channels_last_3d)
        x = lib.randn(2, 3, 4, 5)
        assert x.is_contiguous(memory_format=lib.contiguous_format)
        assert not x.is_contiguous(memory_format=lib.channels_last)
        assert lib.ones(2, 1, 1, 1).is_contiguous(memory_format=lib.channels_last)


# --- what public programs met ---------------------------------------------------------------------
@pytest.mark.parametrize("setting", [False, True])
def test_indices_that_do_not_broadcast_raise_torchs_index_error(setting):
    msgs = []
    for lib in (staged, torch):
        p = lib.zeros(10, 27)
        with pytest.raises(IndexError) as e:
            if setting:
                p[lib.arange(3), lib.tensor([1, 2, 3, 4])] = 1.0
            else:
                p[lib.arange(3), lib.tensor([1, 2, 3, 4])]
        msgs.append(message(e.value))
    assert msgs[0] == msgs[1]


def test_histogram_has_torchs_default_of_100_bins():
    a, b = both(lambda t: t.histogram(t.linspace(-1, 3, 50), density=True))
    for x, y in zip(a, b):  # float32 bin widths: 1 ulp of an edge is 6e-6 of a width
        assert_close(x, y, rtol=2e-5, atol=1e-7)
    assert a.hist.shape == (100,)


def test_max_pool2d_maps_under_vmap_for_per_sample_gradients():
    # torch's per-sample-gradients tutorial: vmap(grad(loss)) through a max pool
    res = []
    for lib in (staged, torch):
        lib.manual_seed(0)
        conv = lib.nn.Conv2d(1, 2, 3)
        params = {k: v.detach() for k, v in conv.named_parameters()}
        data, targets = lib.randn(3, 1, 6, 6), lib.randn(3, 2, 2, 2)

        def loss(p, x, y, lib=lib, conv=conv):
            out = lib.func.functional_call(conv, p, (x.unsqueeze(0),))
            return ((lib.nn.functional.max_pool2d(out, 2) - y) ** 2).sum()

        grads = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0, 0))(params, data, targets)
        res.append(grads)
    for k in res[1]:
        assert_close(res[0][k], res[1][k], rtol=1e-5, atol=1e-6)


def test_torch_rms_norm_is_nn_functionals():
    a, b = both(lambda t: t.rms_norm(t.arange(8.0).reshape(2, 4), [4], t.ones(4) * 2, 1e-5))
    assert_close(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
@pytest.mark.filterwarnings("ignore:Implicit dimension choice")
def test_softmax_modules_without_dim_take_torchs_implicit_dim(ndim):
    """nn.Softmax() and nn.LogSoftmax() took dim -1; torch's legacy rule is dim 0 for 0-, 1-
    and 3-d input, else 1 (found by the fourth hunt)."""
    x = np.random.default_rng(ndim).standard_normal((2, 3, 4, 5)[:ndim]).astype(np.float32)
    for cls in ("Softmax", "LogSoftmax"):
        got = getattr(staged.nn, cls)()(staged.tensor(x)).numpy()
        want = getattr(torch.nn, cls)()(torch.tensor(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
