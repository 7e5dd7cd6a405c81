"""torch's factories staged lacked (``asarray``, ``range``, ``empty_strided``,
``unravel_index``), factories' ``layout=`` and ``memory_format=``, and the layout of tensors
made like a strided one (``preserve_format``): against torch 2.13."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import message, to_numpy


def _both(src: str):
    """``src`` evaluated with ``L`` as staged and as torch."""
    return [eval(src, {"L": L, "np": np}) for L in (staged, torch)]


def _same_values(ours, theirs):
    assert str(ours.dtype).rpartition(".")[2] == str(theirs.dtype).rpartition(".")[2]
    np.testing.assert_array_equal(to_numpy(ours), to_numpy(theirs))


# asarray


def test_asarray_shares_a_numpy_arrays_memory_as_torch_does():
    a = np.arange(6.0).reshape(2, 3).T
    ours, theirs = staged.asarray(a), torch.asarray(a)
    assert np.shares_memory(ours.numpy(), a) and np.shares_memory(theirs.numpy(), a)
    assert ours.stride() == theirs.stride() == (1, 3)
    a[0, 0] = 100.0
    assert ours[0, 0].item() == theirs[0, 0].item() == 100.0


@pytest.mark.parametrize(
    "kwargs, shares",
    [
        ({}, True),
        ({"copy": True}, False),
        ({"dtype": "float64"}, True),
        ({"dtype": "float32"}, False),
    ],
)
def test_asarray_copies_a_numpy_array_where_torch_does(kwargs, shares):
    a = np.arange(3.0)
    got = []
    for L in (staged, torch):
        kw = {k: getattr(L, v) if k == "dtype" else v for k, v in kwargs.items()}
        t = L.asarray(a, **kw)
        got.append((str(t.dtype).rpartition(".")[2], np.shares_memory(t.numpy(), a)))
    assert got[0] == got[1] and got[0][1] is shares


@pytest.mark.parametrize("L", [staged, torch], ids=["staged", "torch"])
def test_asarray_of_a_tensor_is_the_tensor_unless_copied_or_converted(L):
    x = L.ones(3)
    assert L.asarray(x) is x and L.asarray(x, dtype=L.float32, copy=False) is x
    c = L.asarray(x, copy=True)
    c[0] = 5.0
    assert x[0].item() == 1.0 and c.dtype == x.dtype
    d = L.asarray(x, dtype=L.float64)
    assert d.dtype == L.float64 and d is not x


@pytest.mark.parametrize(
    "src",
    [
        "L.asarray(np.arange(3.), dtype=L.float32, copy=False)",
        "L.asarray(L.ones(2), dtype=L.float64, copy=False)",
        "L.asarray([1, 2], copy=False)",
        "L.asarray(3.0, copy=False)",
    ],
)
def test_asarray_refuses_to_alias_as_torch_does(src):
    messages = []
    for L in (staged, torch):
        with pytest.raises(ValueError) as e:
            eval(src, {"L": L, "np": np})
        messages.append(message(e.value))  # staged's after the site, <string>:1:
    assert messages[0] == messages[1]


@pytest.mark.parametrize(
    "src",
    [
        "L.asarray([1, 2])",
        "L.asarray([1.0, 2])",
        "L.asarray([[True], [False]])",
        "L.asarray(3.5)",
        "L.asarray(2 + 1j)",
        "L.asarray(np.float64(2.0))",
        "L.asarray(np.array([1, 2], dtype=np.int16))",
        "L.asarray(range(3))",
        "L.asarray([1, 2], dtype=L.float64)",
        "L.asarray([L.tensor(1.0), L.tensor(2.0)])",
    ],
)
def test_asarray_of_data_is_torchs(src):
    _same_values(*_both(src))


@pytest.mark.parametrize("requires_grad", [None, False, True])
@pytest.mark.parametrize("copy", [None, True])
@pytest.mark.parametrize("what", ["leaf", "result", "plain"])
def test_asarray_requires_grad_as_torch_sets_it(what, copy, requires_grad):
    got = []
    for L in (staged, torch):
        leaf = L.ones(2, requires_grad=True)
        x = {"leaf": leaf, "result": leaf * 2, "plain": L.ones(2)}[what]
        kw = {} if requires_grad is None else {"requires_grad": requires_grad}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's: requires_grad's default changed
            r = L.asarray(x, copy=copy, **kw)
        got.append((r is x, r.requires_grad, r.is_leaf, x.requires_grad, r.grad_fn is None))
    assert got[0] == got[1]


def test_asarray_checks_the_device():
    with pytest.raises(RuntimeError, match="meta2"):
        staged.asarray([1.0], device="meta2")


# range


@pytest.mark.parametrize(
    "src",
    [
        "L.range(1, 4)",
        "L.range(0, 1, 0.1)",
        "L.range(0, 0.3, 0.1, dtype=L.float64)",
        "L.range(1, 0, -1)",
        "L.range(5, 0, -2)",
        "L.range(0.5, 3.7, dtype=L.int64)",
        "L.range(0, 5, 2, dtype=L.uint8)",
        "L.range(1, 4, dtype=L.float16)",
        "L.range(L.tensor(1), 3)",
        "L.range(-1.5, 2.5, 0.5, requires_grad=True)",
    ],
)
def test_range_includes_its_end_as_torchs_does(src):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = _both(src)
    _same_values(ours, theirs)
    assert ours.requires_grad == theirs.requires_grad


def test_range_warns_that_it_is_deprecated_as_torch_does():
    messages = []
    for L in (staged, torch):
        with pytest.warns(UserWarning) as w:
            L.range(0, 2)
        messages.append(str(w[0].message))
    assert messages[0] == messages[1] and "deprecated" in messages[0]


@pytest.mark.parametrize(
    "args, message",
    [((0, 1, 0), "step must be nonzero"), ((1, 0), "inconsistent with step sign")],
)
def test_range_refuses_as_torch_does(args, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for L in (staged, torch):
            with pytest.raises(RuntimeError, match=message):
                L.range(*args)


# empty_strided and memory_format= / layout=


@pytest.mark.parametrize(
    "size, stride", [((2, 3), (1, 2)), ((2, 3), (3, 1)), ((2, 3, 4), (1, 8, 2)), ((0, 3), (3, 1))]
)
def test_empty_strided_has_the_strides_asked_for(size, stride):
    ours = staged.empty_strided(size, stride, dtype=staged.float64)
    theirs = torch.empty_strided(size, stride, dtype=torch.float64)
    assert (ours.shape, ours.stride(), ours.dtype) == (
        theirs.shape,
        theirs.stride(),
        staged.float64,
    )
    assert ours.is_contiguous() == theirs.is_contiguous()
    ours.fill_(2.0)  # writable, every element once
    assert float(ours.sum()) == 2.0 * ours.numel()


def test_empty_strided_refuses_strides_of_another_rank():
    for L in (staged, torch):
        with pytest.raises(RuntimeError, match=r"dimensionality of sizes \(2\) must match"):
            L.empty_strided((2, 3), (1,))


@pytest.mark.parametrize(
    "src",
    [
        "L.empty(2, 3, 4, 5, memory_format=L.channels_last).stride()",
        "L.empty(2, 3, 4, 5, 6, memory_format=L.channels_last_3d).stride()",
        "L.empty(2, 3, memory_format=L.contiguous_format).stride()",
        "L.empty(1, 3, 1, 2, memory_format=L.channels_last).stride()",
        "L.empty(2, 3, 4, 5, memory_format=L.channels_last).is_contiguous("
        "memory_format=L.channels_last)",
    ],
)
def test_empty_lays_out_its_memory_format_as_torch_does(src):
    ours, theirs = _both(src)
    assert ours == theirs


@pytest.mark.parametrize(
    "src, error",
    [
        ("L.empty(2, 3, memory_format=L.channels_last)", RuntimeError),
        ("L.empty(2, 3, memory_format=L.preserve_format)", RuntimeError),
        ("L.zeros_like(L.zeros(2, 3), memory_format=L.channels_last)", RuntimeError),
        ("L.zeros(2, layout='strided')", TypeError),
    ],
)
def test_memory_format_and_layout_errors_are_torchs(src, error):
    messages = []
    for L in (staged, torch):
        with pytest.raises(error) as e:
            eval(src, {"L": L})
        messages.append(message(e.value))  # staged's after the site, <string>:1:
    assert messages[0] == messages[1]


FACTORIES = [
    "L.zeros(2, 3, layout=L.strided)",
    "L.ones(2, layout=L.strided)",
    "L.empty(2, layout=L.strided).shape",
    "L.full((2,), 1.5, layout=L.strided)",
    "L.arange(3, layout=L.strided)",
    "L.linspace(0, 1, 3, layout=L.strided)",
    "L.logspace(0, 1, 3, layout=L.strided)",
    "L.eye(2, layout=L.strided)",
    "L.zeros_like(L.ones(2), layout=L.strided)",
    "L.ones_like(L.ones(2), layout=L.strided, memory_format=L.contiguous_format)",
    "L.full_like(L.ones(2), 7, layout=L.strided)",
    "L.empty_like(L.ones(2), layout=L.strided).shape",
    "L.empty_strided((2,), (1,), layout=L.strided).shape",
]


@pytest.mark.parametrize("src", FACTORIES)
def test_factories_take_the_strided_layout(src):
    ours, theirs = _both(src)
    if isinstance(theirs, torch.Size):
        assert tuple(ours) == tuple(theirs)
    else:
        _same_values(ours, theirs)


@pytest.mark.parametrize(
    "src",
    [
        "staged.zeros(2, layout=staged.sparse_coo)",
        "staged.rand(2, layout=staged.sparse_coo)",
        "staged.zeros_like(staged.ones(2), layout=staged.sparse_coo)",
        "staged.arange(3, layout=staged.sparse_coo)",
    ],
)
def test_factories_refuse_other_layouts_saying_so(src):
    with pytest.raises(RuntimeError, match=r"layout=torch.sparse_coo is not supported"):
        eval(src, {"staged": staged})


# preserve_format: a new tensor made like a strided one

STRIDED = [
    "L.zeros(2, 3).t()",
    "L.zeros(2, 3, 4).permute(2, 0, 1)",
    "L.zeros(6)[::2]",
    "L.zeros(3).expand(2, 3)",
    "L.zeros(4, 6)[:, ::2].t()",
    "L.zeros(3, 1, 4).permute(2, 1, 0)",
    "L.zeros(5, 1, 1).permute(1, 2, 0)",
    "L.zeros(2, 3, 4, 5).permute(0, 2, 3, 1)",
    "L.zeros(2, 1, 3).expand(2, 4, 3).transpose(0, 2)",
    "L.zeros(3, 3, 3)[:, 1].t()",
    "L.zeros(2, 3)",
]
LIKE = [
    "L.zeros_like({x})",
    "L.ones_like({x})",
    "L.full_like({x}, 2.5)",
    "L.empty_like({x})",
    "L.rand_like({x})",
    "L.randn_like({x})",
    "L.randint_like({x}, 5)",
    "L.zeros_like({x}, memory_format=L.preserve_format)",
    "L.zeros_like({x}, memory_format=L.contiguous_format)",
    "L.ones_like({x}, dtype=L.float64)",
]


@pytest.mark.parametrize("like", LIKE)
@pytest.mark.parametrize("x", STRIDED)
def test_a_tensor_made_like_a_strided_one_has_torchs_strides(like, x):
    ours, theirs = _both(like.format(x=x))
    assert (ours.shape, ours.stride()) == (theirs.shape, theirs.stride())
    if "rand" not in like and "empty" not in like:
        _same_values(ours, theirs)


@pytest.mark.parametrize("fill", ["rand_like", "randn_like"])
def test_draws_like_a_strided_tensor_are_torchs(fill):
    src = f"(L.manual_seed(0), L.{fill}(L.zeros(2, 3, 4).permute(2, 0, 1)))[1]"
    ours, theirs = _both(src)
    np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), rtol=1e-6)


@pytest.mark.parametrize(
    "fmt, shape", [("channels_last", (2, 3, 4, 5)), ("channels_last_3d", (1, 2, 3, 4, 5))]
)
def test_like_factories_lay_out_the_format_asked_for(fmt, shape):
    src = f"L.zeros_like(L.ones{shape}, memory_format=L.{fmt})"
    ours, theirs = _both(src)
    assert ours.stride() == theirs.stride()


def test_laid_out_like_gives_clone_torchs_preserve_format():
    """``memory_formats.laid_out_like``: what ``clone`` needs to keep a permuted input's
    strides (torch: ``x.permute(2, 0, 1).clone().stride() == (1, 12, 4)``)."""
    from staged.eager.ops import memory_formats

    for src in STRIDED:  # distinct values, laid out as the view of zeros was
        x, tx = _both(
            src.replace("L.zeros(", "(lambda L, *s: L.arange(float(np.prod(s))).reshape(s))(L, ")
        )
        r = memory_formats.laid_out_like(x, x.clone())
        assert r.stride() == tx.clone().stride(), src
        np.testing.assert_array_equal(to_numpy(r), to_numpy(tx))


# unravel_index


@pytest.mark.parametrize(
    "src",
    [
        "L.unravel_index(L.tensor([4, 1]), (2, 3))",
        "L.unravel_index(L.tensor(4), (2, 3))",
        "L.unravel_index(L.tensor([[1, 5], [0, 2]]), (2, 3))",
        "L.unravel_index(L.tensor(3, dtype=L.int32), (2, 3))",
        "L.unravel_index(L.tensor(3), 4)",
        "L.unravel_index(L.tensor(3), L.Size([4]))",
        "L.unravel_index(L.tensor([6, -1, -7]), (2, 3))",
        "L.unravel_index(L.tensor([0, 23, 17]), [2, 3, 4])",
        "L.unravel_index(L.tensor(0), ())",
    ],
)
def test_unravel_index_is_torchs(src):
    ours, theirs = _both(src)
    assert isinstance(ours, tuple) and len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        _same_values(a, b)


@pytest.mark.parametrize(
    "src, error",
    [
        ("L.unravel_index(L.tensor(1.0), (2, 3))", TypeError),
        ("L.unravel_index(L.tensor(True), (2, 3))", TypeError),
        ("L.unravel_index(L.tensor(3), (2, -3))", ValueError),
        ("L.unravel_index(L.tensor(3), (2, 3.0))", TypeError),
        ("L.unravel_index(L.tensor(3), 'ab')", TypeError),
    ],
)
def test_unravel_index_refuses_as_torch_does(src, error):
    for L in (staged, torch):
        with pytest.raises(error):
            eval(src, {"L": L})


def test_unravel_index_compiles():
    f = staged.compile(lambda i: staged.stack(staged.unravel_index(i, (3, 4))))
    i = staged.tensor([0, 5, 11])
    np.testing.assert_array_equal(f(i).numpy(), [[0, 1, 2], [0, 1, 3]])
