"""``torch.ops.aten``: staged's ops under torch's schemas, each call run on staged and on
torch (values, dtypes, gradients, what they alias), the overload objects as torch's, the
errors; and ``staged/_aten_schemas.py`` current with torch's schemas."""

import numpy as np
import pytest
import torch

import staged
from staged._aten_schemas import SCHEMAS
from tests.ops import aten_schemas


def test_schema_table_is_current():
    made = {name: tuple(texts) for name, texts in aten_schemas.schemas().items()}
    assert made == SCHEMAS, "staged/_aten_schemas.py is stale: run `make generated`"


A = np.array([[3.0, -1.0, 2.0, 0.5], [-4.0, 5.0, 1.5, -2.5], [0.25, 7.0, -3.0, 6.0]])
B = np.array([[1.0, 2.0], [-1.0, 0.5], [3.0, -2.0], [0.0, 4.0]])
I = np.array([2, 0, 2])


# (name, call): call(aten, lib, x, b, i) with x (3, 4) float64 requiring grad, b (4, 2)
CASES = [
    ("clone", lambda a, L, x, b, i: a.clone.default(x)),
    ("_to_copy", lambda a, L, x, b, i: a._to_copy.default(x, dtype=L.float32)),
    ("alias", lambda a, L, x, b, i: a.alias.default(x)),
    ("sort", lambda a, L, x, b, i: a.sort.default(x, 1, True)),
    ("sort.stable", lambda a, L, x, b, i: a.sort.stable(x, stable=True, dim=0)),
    ("cat", lambda a, L, x, b, i: a.cat.default([x, x * 2], 1)),
    ("flip", lambda a, L, x, b, i: a.flip.default(x, [0, 1])),
    ("index_select", lambda a, L, x, b, i: a.index_select.default(x, 0, i)),
    ("slice", lambda a, L, x, b, i: a.slice.Tensor(x, -1, 1, None, 2)),
    ("slice.dim0", lambda a, L, x, b, i: a.slice.Tensor(x, 0, -2)),
    ("index", lambda a, L, x, b, i: a.index.Tensor(x, [None, L.tensor([3, 1])])),
    ("index.both", lambda a, L, x, b, i: a.index.Tensor(x, [i, L.tensor([0, 3, 1])])),
    ("add", lambda a, L, x, b, i: a.add.Tensor(x, x * x, alpha=2)),
    ("add.Scalar", lambda a, L, x, b, i: a.add.Scalar(x, 1.5)),
    ("sub", lambda a, L, x, b, i: a.sub.Tensor(x, 2 * x, alpha=0.5)),
    ("select", lambda a, L, x, b, i: a.select.int(x, 1, -1)),
    ("unsqueeze", lambda a, L, x, b, i: a.unsqueeze.default(x, 1)),
    ("unbind", lambda a, L, x, b, i: a.unbind.int(x, 1)),
    ("squeeze.dim", lambda a, L, x, b, i: a.squeeze.dim(x[:1], 0)),
    ("squeeze", lambda a, L, x, b, i: a.squeeze.default(x[:, :1])),
    ("detach", lambda a, L, x, b, i: a.detach.default(x)),
    ("mm", lambda a, L, x, b, i: a.mm.default(x, b)),
    ("sum.dim_IntList", lambda a, L, x, b, i: a.sum.dim_IntList(x, [1], True)),
    ("sum", lambda a, L, x, b, i: a.sum.default(x, dtype=L.float32)),
    ("max.dim", lambda a, L, x, b, i: a.max.dim(x, 0)),
    ("var.correction", lambda a, L, x, b, i: a.var.correction(x, [1], correction=0)),
    ("softmax", lambda a, L, x, b, i: a.softmax.int(x, -1)),
    ("log_softmax", lambda a, L, x, b, i: a.log_softmax.int(x, 0)),
    ("embedding", lambda a, L, x, b, i: a.embedding.default(x, i)),
    ("div.Tensor_mode", lambda a, L, x, b, i: a.div.Tensor_mode(x, 0.7, rounding_mode="floor")),
    ("where", lambda a, L, x, b, i: a.where.self(x > 0, x, -x)),
    ("zeros", lambda a, L, x, b, i: a.zeros.default([2, 3], dtype=L.int32)),
    ("arange", lambda a, L, x, b, i: a.arange.start_step(1, 10, 3)),
    ("linalg_vector_norm", lambda a, L, x, b, i: a.linalg_vector_norm.default(x, 3, [0])),
    ("special_erfcx", lambda a, L, x, b, i: a.special_erfcx.default(x)),
    ("fft_rfft", lambda a, L, x, b, i: a.fft_rfft.default(x, n=6)),
    ("pad", lambda a, L, x, b, i: a.pad.default(x, [1, 2], "reflect")),
    ("to.dtype", lambda a, L, x, b, i: a.to.dtype(x, L.float32)),
    ("view", lambda a, L, x, b, i: a.view.default(x, [2, 6])),
    ("expand", lambda a, L, x, b, i: a.expand.default(x[:1], [3, -1])),
    ("permute", lambda a, L, x, b, i: a.permute.default(x, [1, 0])),
    (
        "scatter_add",
        lambda a, L, x, b, i: a.scatter_add.default(x, 0, i[:, None] + 0 * x.long(), x),
    ),
    (
        "scatter_reduce",
        lambda a, L, x, b, i: a.scatter_reduce.two(x, 0, i[:, None] + 0 * x.long(), x, "amax"),
    ),
    ("index_add", lambda a, L, x, b, i: a.index_add.default(x[:2], 0, i[:2] % 2, x[1:], alpha=3)),
    ("huber_loss.none", lambda a, L, x, b, i: a.huber_loss.default(x, x * 0.5, 0, 0.7)),
    ("huber_loss.sum", lambda a, L, x, b, i: a.huber_loss.default(x, x * 0.5, 2)),
    ("kl_div", lambda a, L, x, b, i: a.kl_div.default(x, x.exp() / 9, 2)),
    (
        "bce_logits",
        lambda a, L, x, b, i: a.binary_cross_entropy_with_logits.default(
            x, x.sigmoid().detach(), None, None, 0
        ),
    ),
    (
        "ctc_loss",
        lambda a, L, x, b, i: a.ctc_loss.IntList(
            x.reshape(4, 1, 3).log_softmax(2), L.tensor([[1, 2]]), [4], [2], 0, 2
        ),
    ),
    ("packet", lambda a, L, x, b, i: a.add(x, 1)),
    ("packet.mul", lambda a, L, x, b, i: a.mul(x, x)),
]


def _run(lib, call):
    x = lib.tensor(A, requires_grad=True)
    out = call(lib.ops.aten, lib, x, lib.tensor(B), lib.tensor(I))
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    floats = [t for t in outs if t.dtype.is_floating_point or t.dtype.is_complex]
    grad = None
    if any(t.requires_grad for t in floats):
        total = sum(
            (t.abs() if t.dtype.is_complex else t).sum() * (k + 1)
            for k, t in enumerate(floats)
            if t.requires_grad
        )
        (grad,) = lib.autograd.grad(total, x)
    return outs, grad


@pytest.mark.parametrize("name,call", CASES, ids=[c[0] for c in CASES])
def test_calls_give_torchs_results(name, call):
    outs, grad = _run(staged, call)
    want, want_grad = _run(torch, call)
    assert len(outs) == len(want)
    for got, ref in zip(outs, want):
        assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
        assert tuple(got.shape) == tuple(ref.shape)
        np.testing.assert_allclose(
            got.detach().numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12
        )
        assert got.requires_grad == ref.requires_grad
    if want_grad is None:
        assert grad is None
    else:
        np.testing.assert_allclose(grad.numpy(), want_grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lib", [staged, torch], ids=["staged", "torch"])
def test_views_and_in_place_overloads(lib):
    aten = lib.ops.aten
    x = lib.tensor(A)
    a = aten.alias.default(x)
    assert a is not x and a.data_ptr() == x.data_ptr() and a._base is x
    s = aten.slice.Tensor(x, 1, 1, 3)
    assert s._base is x and s.storage_offset() == 1
    c = aten._to_copy.default(x)
    assert c.data_ptr() != x.data_ptr() and c.dtype == x.dtype
    version = x._version
    out = aten.add_.Tensor(x, lib.ones(3, 4), alpha=2)
    assert out is x and x._version == version + 1
    np.testing.assert_array_equal(x.numpy(), A + 2)
    aten.sub_.Tensor(x, lib.ones(3, 4))
    np.testing.assert_array_equal(s.numpy(), (A + 1)[:, 1:3])
    leaf = lib.tensor(A, requires_grad=True)
    assert type(aten.alias.default(leaf).grad_fn).__name__ == "AliasBackward0"


@pytest.mark.parametrize("lib", [staged, torch], ids=["staged", "torch"])
def test_overload_objects(lib):
    aten = lib.ops.aten
    op = aten.add.Tensor
    assert op.__name__ == "add.Tensor" and op.name() == "aten::add.Tensor"
    assert aten.clone.default.name() == "aten::clone"
    assert op.overloadpacket is aten.add and aten.add.__name__ == "add"
    assert str(op) == "aten.add.Tensor"
    assert aten.add.Tensor is op and {op: 1}[aten.add.Tensor] == 1
    assert {"Tensor", "Scalar"} <= set(aten.add.overloads())
    assert "default" in aten.clone.overloads()


@pytest.mark.parametrize("lib", [staged, torch], ids=["staged", "torch"])
def test_errors(lib):
    aten = lib.ops.aten
    with pytest.raises(AttributeError, match="no attribute 'not_an_op'"):
        aten.not_an_op
    with pytest.raises(AttributeError, match="no overload name 'nope'"):
        aten.add.nope
    with pytest.raises(RuntimeError, match="(?s)Expected a value of type 'Tensor'.*other"):
        aten.add.Tensor(lib.ones(2), "a")
    with pytest.raises(RuntimeError, match="missing value for argument 'dim'"):
        aten.select.int(lib.ones(2))
