"""Op database entries for the ops staged had before the op-coverage work: arithmetic,
comparisons, the first elementwise functions, reductions, shape ops, matmul, the
softmax family and the losses."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as TF
from torch.nn.attention import SDPBackend, sdpa_kernel

import staged
import staged.nn.functional as F
from tests.ops.opinfo import OpInfo, Sample, Skip, arr, distinct, index

FLOATS = ("float32", "float64")
INTS = FLOATS + ("int64",)
UNORDERED = Skip("complex", "complex numbers are not ordered (PyTorch rejects them too)")
NO_COMPLEX = Skip("complex", "PyTorch has no complex kernel for this op")


def unary(low=-2.0, high=2.0, kink=None):
    """A matrix, a 0-d scalar, a size-0 tensor; ``kink``: keep values that far from 0."""

    def samples(dtype, rng):
        def make(shape):
            a = arr(rng, dtype, shape, low, high)
            if kink:
                a = np.asarray(
                    np.where(np.abs(a) < kink, a + 2 * kink * np.sign(a + 1e-30), a), dtype
                )
            return a

        return [Sample((make((3, 4)),)), Sample((make(()),)), Sample((make((0, 3)),))]

    return samples


def binary(low=-2.0, high=2.0, y_low=None, y_high=None, scalar=1.5):
    """Same shapes, broadcasting, 0-d with a matrix, size-0, and a Python number."""

    def samples(dtype, rng):
        def x(s):
            return arr(rng, dtype, s, low, high)

        def y(s):
            return arr(
                rng, dtype, s, low if y_low is None else y_low, high if y_high is None else y_high
            )

        out = [
            Sample((x((2, 3)), y((2, 3)))),
            Sample((x((3, 1)), y((4,)))),
            Sample((x(()), y((2, 2)))),
            Sample((x((0, 3)), y((1, 3)))),
        ]
        return out + ([Sample((x((2, 3)), scalar))] if scalar is not None else [])

    return samples


def _ew(name, samples, dtypes=FLOATS + ("complex64", "complex128"), skips=(), **kw):
    return OpInfo(
        name,
        getattr(staged, name),
        getattr(torch, name),
        samples,
        dtypes=dtypes,
        skips=list(skips),
        **kw,
    )


def _real(name, samples, reason=UNORDERED, **kw):
    return _ew(name, samples, dtypes=FLOATS, skips=[reason], **kw)


def _cmp(name):
    return OpInfo(
        name,
        getattr(staged, name),
        getattr(torch, name),
        binary(-1, 1),
        dtypes=FLOATS + ("int64",),
        differentiable=False,
        skips=[UNORDERED]
        if name not in ("eq", "ne")
        else [Skip("complex", "swept for floats and ints; complex eq/ne are lowered")],
    )


def _dims(dtype, rng, keepdim=True):
    x = arr(rng, dtype, (3, 4))
    out = [
        Sample((x,)),
        Sample((x, 1)),
        Sample((arr(rng, dtype, (2, 3, 4)), (0, 2))),
        Sample((arr(rng, dtype, ()),)),
    ]
    if keepdim:
        out.append(Sample((x, -1, True)))
    return out


def _extremum_samples(dtype, rng):
    x = distinct(rng, dtype, (3, 4))
    return [
        Sample((x,)),
        Sample((x, 1)),
        Sample((x, 0, True)),
        Sample((distinct(rng, dtype, (2, 3, 4)), -1)),
    ]


def _amax_samples(dtype, rng):
    x = distinct(rng, dtype, (3, 4))
    ties = np.asarray([[1.0, 3.0, 3.0], [2.0, 2.0, 0.5]], dtype)
    return [Sample((x,)), Sample((x, 1)), Sample((x, (0, 1), True)), Sample((ties, 1))]


def _var_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x,)),
        Sample((x, 1)),
        Sample((x, 0), {"keepdim": True}),
        Sample((x, 1), {"correction": 0}),
    ]


def _shape(name, op, torch_op, samples):
    return OpInfo(name, op, torch_op, samples, dtypes=FLOATS + ("complex64", "int64"))


def _one(shape, *args, **kwargs):
    def samples(dtype, rng):
        return [Sample((arr(rng, dtype, shape),) + args, kwargs)]

    return samples


def _many(*cases):
    """Samples from ``(shape, args...)`` tuples."""

    def samples(dtype, rng):
        return [Sample((arr(rng, dtype, c[0]),) + tuple(c[1:])) for c in cases]

    return samples


def _matmul_samples(dtype, rng):
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample((a(2, 3), a(3, 4))),
        Sample((a(3), a(3))),
        Sample((a(3), a(3, 2))),
        Sample((a(2, 3), a(3))),
        Sample((a(2, 2, 3), a(3, 4))),
        Sample((a(2, 1, 2, 3), a(3, 3, 2))),
        Sample((a(0, 3), a(3, 2))),
        Sample((a(3, 1), a(1, 4))),  # outer products: one elementwise kernel compiled,
        Sample((a(2, 3, 1), a(2, 1, 4))),  # BLAS eagerly (Note [outer products])
    ]


def _loss_samples(dtype, rng):
    x = arr(rng, dtype, (4, 5))
    t = index(rng, 5, (4,))
    return [
        Sample((x, t)),
        Sample((x, t), {"reduction": "sum"}),
        Sample((x, t), {"reduction": "none"}),
        Sample((x, np.asarray([0, -100, 2, 4], np.int64)), {"ignore_index": -100}),
        Sample((x, t), {"label_smoothing": 0.1}),
        Sample((arr(rng, dtype, (2, 5, 3)), index(rng, 5, (2, 3)))),
    ]


def _nll_samples(dtype, rng):
    return [s for s in _loss_samples(dtype, rng) if "label_smoothing" not in s.kwargs]


def _mse_samples(dtype, rng):
    x, y = arr(rng, dtype, (3, 4)), arr(rng, dtype, (3, 4))
    return [
        Sample((x, y)),
        Sample((x, y), {"reduction": "sum"}),
        Sample((x, y), {"reduction": "none"}),
    ]


def _where_samples(dtype, rng):
    c = arr(rng, "bool", (2, 3))
    return [
        Sample((c, arr(rng, dtype, (2, 3)), arr(rng, dtype, (2, 3)))),
        Sample((arr(rng, "bool", (3, 1)), arr(rng, dtype, (4,)), arr(rng, dtype, ()))),
        Sample((c, arr(rng, dtype, (2, 3)), 0.5)),
    ]


def _cast(dtype):
    skips = [Skip("complex", "casts from complex are swept by the complex ops")]
    if dtype == "float32":
        skips.append(
            Skip(
                "fd",
                "a float32 result: float64 finite differences would measure "
                "its rounding (the VJP is checked against torch)",
                ("float64",),
            )
        )
    return OpInfo(
        f"to_{dtype}",
        lambda x: x.to(getattr(staged, dtype)),
        lambda x: x.to(getattr(torch, dtype)),
        unary(),
        dtypes=FLOATS + ("int64",),
        differentiable=dtype.startswith("float"),
        skips=skips,
    )


def _repeat_interleave_samples(dtype, rng):
    x = arr(rng, dtype, (3, 4))
    return [
        Sample((x, 2, 1), name="int"),
        Sample(
            (x, np.asarray([1, 0, 2], np.int64), 0), {"output_size": 3}, name="tensor, output_size"
        ),
        Sample((arr(rng, dtype, (2, 3)), 2), name="flattened"),
    ]


def _einsum_samples(dtype, rng):
    """CI runs the first two and the last: attention scores, broadcast ellipsis with the
    implicit output, and a diagonal contracted with a matrix."""
    a = lambda *s: arr(rng, dtype, s)  # noqa: E731
    return [
        Sample(("bhqd,bhkd->bhqk", a(2, 2, 3, 4), a(2, 2, 5, 4)), name="attention"),
        Sample(("...ij,...jk", a(2, 1, 2, 3), a(3, 3, 2)), name="ellipsis"),
        Sample(("i,j->ij", a(2), a(3)), name="outer"),
        Sample(("ii->i", a(3, 3)), name="diagonal"),
        Sample(("ij,jk,kl->il", a(2, 3), a(3, 4), a(4, 2)), name="chain"),
        Sample(("iij,jk->ki", a(3, 3, 2), a(2, 4)), name="diagonal, contracted"),
    ]


def _sdpa_samples(dtype, rng):
    q, k, v = (
        arr(rng, dtype, (1, 2, 3, 4)),
        arr(rng, dtype, (1, 2, 5, 4)),
        arr(rng, dtype, (1, 2, 5, 4)),
    )
    mask = arr(rng, "bool", (3, 5))
    mask[0] = False  # a row that attends nowhere: zeros, as torch
    return [
        Sample((q, k, v), name="plain"),
        Sample((q, k, v, mask), name="bool mask"),
        Sample((q, k, v, arr(rng, dtype, (3, 5))), {"scale": 0.3}, name="float mask"),
        Sample(
            (arr(rng, dtype, (1, 4, 3, 4)), k, v),
            {"enable_gqa": True, "is_causal": True},
            name="gqa, causal",
        ),
    ]


def _torch_sdpa_math(*args, **kwargs):
    """torch's math kernel: the flash kernel its CPU build picks has no forward AD."""
    with sdpa_kernel(SDPBackend.MATH):
        return TF.scaled_dot_product_attention(*args, **kwargs)


def _metadata(name, fn):
    """``numel``, ``is_tensor``...: Python values of a tensor's metadata."""
    return OpInfo(
        name,
        getattr(staged, name),
        getattr(torch, name),
        _one((2, 3)),
        dtypes=("float32", "int64"),
        differentiable=False,
        skips=[Skip("capture", f"returns a Python {fn}, not a tensor: nothing to capture")],
    )


_WEIGHT = np.linspace(0.5, 1.5, 5)


def _weighted(fn, tensor):
    """``fn`` with class weights: a constant, as torch does not differentiate them."""
    return lambda x, t: fn(x, t, weight=tensor(_WEIGHT).to(x.dtype))


POS = dict(low=0.3, high=2.0)
ENTRIES = [
    # arithmetic
    *(_ew(n, binary()) for n in ("add", "sub", "mul")),
    _ew("div", binary(y_low=0.5, y_high=2.0)),
    OpInfo(
        "pow",
        staged.pow,
        torch.pow,
        binary(0.3, 2.0, -2.0, 2.0),
        dtypes=FLOATS,
        skips=[Skip("complex", "complex pow is swept by the complex ops")],
    ),
    _ew("neg", unary()),
    _ew(
        "abs",
        unary(kink=0.1),
        dtypes=FLOATS,
        skips=[Skip("complex", "complex abs (a cross-domain op) is swept by the complex ops")],
    ),
    _real("maximum", binary(scalar=None)),
    _real("minimum", binary(scalar=None)),
    # elementwise functions
    _ew("exp", unary()),
    _ew("log", unary(**POS)),
    _ew("sqrt", unary(**POS)),
    _ew("tanh", unary()),
    _ew("sigmoid", unary()),
    _ew("sin", unary()),
    _ew("cos", unary()),
    _real("log1p", unary(**POS), NO_COMPLEX),
    _real("expm1", unary(), NO_COMPLEX),
    _real("rsqrt", unary(**POS), Skip("complex", "rsqrt of complex is not swept yet")),
    _real("relu", unary(kink=0.1)),
    _real("sign", unary(kink=0.1)),
    # a bool's sign is itself (NumPy has no boolean sign)
    *(
        OpInfo(
            f"{n}_bool",
            getattr(staged, n),
            getattr(torch, n),
            lambda dtype, rng: [Sample((arr(rng, dtype, (3, 4)),)), Sample((arr(rng, dtype, ()),))],
            dtypes=("bool",),
            differentiable=False,
        )
        for n in ("sign", "sgn")
    ),
    _ew("clone", unary(), dtypes=FLOATS + ("complex64", "int64")),
    OpInfo("where", staged.where, torch.where, _where_samples, dtypes=FLOATS + ("complex64",)),
    _cast("float32"),
    _cast("float64"),
    _cast("int64"),
    # comparisons and logic
    *(_cmp(n) for n in ("eq", "ne", "lt", "le", "gt", "ge")),
    *(
        OpInfo(
            n,
            getattr(staged, n),
            getattr(torch, n),
            binary(-1, 1, scalar=None),
            dtypes=("bool", "float32"),
            differentiable=False,
            skips=[Skip("complex", "logic ops are swept on bool/float")],
        )
        for n in ("logical_and", "logical_or")
    ),
    OpInfo(
        "logical_not",
        staged.logical_not,
        torch.logical_not,
        unary(),
        dtypes=("bool", "float32"),
        differentiable=False,
        skips=[Skip("complex", "logic ops are swept on bool/float")],
    ),
    # reductions
    _ew("sum", _dims, dtypes=FLOATS + ("complex64", "int64")),
    _ew("mean", _dims, dtypes=FLOATS + ("complex64",)),
    _real("var", _var_samples, Skip("complex", "complex var is not swept yet")),
    _real("std", _var_samples, Skip("complex", "complex std is not swept yet")),
    _real("amax", _amax_samples),
    _real("amin", _amax_samples),
    OpInfo("max", staged.max, torch.max, _extremum_samples, skips=[UNORDERED]),
    OpInfo("min", staged.min, torch.min, _extremum_samples, skips=[UNORDERED]),
    OpInfo(
        "argmax",
        staged.argmax,
        torch.argmax,
        _extremum_samples,
        differentiable=False,
        skips=[UNORDERED],
    ),
    OpInfo(
        "argmin",
        staged.argmin,
        torch.argmin,
        _extremum_samples,
        differentiable=False,
        skips=[UNORDERED],
    ),
    _ew(
        "logsumexp",
        _many(((3, 4), 1), ((2, 3, 4), (0, 2)), ((3, 4), -1, True)),
        dtypes=FLOATS + ("complex64", "complex128"),
    ),
    # shape
    _shape(
        "reshape",
        staged.reshape,
        torch.reshape,
        _many(((2, 6), (3, 4)), ((2, 6), (-1,)), ((), (1, 1)), ((0, 3), (3, 0))),
    ),
    _shape(
        "view",
        lambda x, *s: x.view(*s),
        lambda x, *s: x.view(*s),
        _many(((2, 6), 4, -1), ((4,), 2, 2)),
    ),
    _shape("flatten", staged.flatten, torch.flatten, _many(((2, 3, 4),), ((2, 3, 4), 1), ((),))),
    _shape(
        "diagonal",
        staged.diagonal,
        torch.diagonal,
        _many(((3, 4),), ((3, 4), 1), ((3, 4), -2), ((2, 3, 4), 0, 2, 0), ((2, 3, 3), 1, -1, -2)),
    ),
    _shape("diag", staged.diag, torch.diag, _many(((3,),), ((3,), 1), ((3,), -2), ((3, 4), 1))),
    _shape(
        "unflatten",
        staged.unflatten,
        torch.unflatten,
        _many(((2, 6), 1, (2, 3)), ((6,), 0, (-1, 2)), ((2, 3), -1, (3, 1))),
    ),
    _shape(
        "squeeze", staged.squeeze, torch.squeeze, _many(((2, 1, 3, 1),), ((2, 1, 3), 1), ((1,), 0))
    ),
    _shape(
        "unsqueeze", staged.unsqueeze, torch.unsqueeze, _many(((2, 3), 0), ((2, 3), -1), ((), 0))
    ),
    _shape(
        "permute", staged.permute, torch.permute, _many(((2, 3, 4), (2, 0, 1)), ((2, 3), (-1, 0)))
    ),
    _shape(
        "transpose", staged.transpose, torch.transpose, _many(((2, 3, 4), 0, 2), ((2, 3), -1, -2))
    ),
    _shape("t", staged.t, torch.t, _many(((2, 3),), ((3,),))),
    _shape("mT", lambda x: x.mT, lambda x: x.mT, _many(((2, 3, 4),))),
    _shape(
        "expand",
        lambda x, *s: x.expand(*s),
        lambda x, *s: x.expand(*s),
        _many(((3, 1), 3, 4), ((3,), 2, 3), ((1,), 2, -1)),
    ),
    _shape(
        "broadcast_to",
        lambda x, s: x.broadcast_to(s),
        lambda x, s: x.broadcast_to(s),
        _many(((3, 1), (2, 3, 4)), ((), (2,))),
    ),
    OpInfo(
        "tril", staged.tril, torch.tril, _many(((3, 4),), ((2, 3, 4), 1), ((4, 3), -2)), dtypes=INTS
    ),
    OpInfo(
        "triu", staged.triu, torch.triu, _many(((3, 4),), ((2, 3, 4), -1), ((4, 3), 2)), dtypes=INTS
    ),
    OpInfo(
        "tril_", lambda x, d: x.clone().tril_(d), lambda x, d: x.clone().tril_(d), _one((3, 4), 1)
    ),
    OpInfo(
        "triu_", lambda x, d: x.clone().triu_(d), lambda x, d: x.clone().triu_(d), _one((3, 4), 1)
    ),
    OpInfo(
        "repeat",
        lambda x, *s: x.repeat(*s),
        lambda x, *s: x.repeat(*s),
        _many(((2, 3), 2, 1), ((3,), 2, 2), ((), 3)),
        dtypes=INTS,
    ),
    OpInfo(
        "repeat_interleave",
        staged.repeat_interleave,
        torch.repeat_interleave,
        _repeat_interleave_samples,
        dtypes=INTS,
    ),
    OpInfo(
        "flip",
        staged.flip,
        torch.flip,
        _many(((3, 4), (0, 1)), ((2, 3, 4), (-1,)), ((), (0,))),
        dtypes=INTS,
    ),
    OpInfo("fliplr", staged.fliplr, torch.fliplr, _one((3, 4))),
    OpInfo("flipud", staged.flipud, torch.flipud, _one((3, 4))),
    OpInfo(
        "roll",
        staged.roll,
        torch.roll,
        _many(((3, 4), 1), ((3, 4), (1, -5), (0, 1)), ((), 1)),
        dtypes=INTS,
    ),
    OpInfo(
        "narrow",
        staged.narrow,
        torch.narrow,
        _many(((3, 4), 1, 1, 2), ((3, 4), 0, -2, 2), ((0, 3), 1, 3, 0)),
        dtypes=INTS,
    ),
    OpInfo(
        "view_as",
        lambda x, o: x.view_as(o),
        lambda x, o: x.view_as(o),
        lambda d, rng: [Sample((arr(rng, d, (2, 6)), arr(rng, d, (3, 4))))],
    ),
    OpInfo(
        "expand_as",
        lambda x, o: x.expand_as(o),
        lambda x, o: x.expand_as(o),
        lambda d, rng: [Sample((arr(rng, d, (3, 1)), arr(rng, d, (2, 3, 4))))],
    ),
    _metadata("numel", "int"),
    _metadata("is_tensor", "bool"),
    _metadata("is_floating_point", "bool"),
    # linear algebra
    OpInfo("matmul", staged.matmul, torch.matmul, _matmul_samples, dtypes=FLOATS + ("complex64",)),
    OpInfo(
        "mm",
        staged.mm,
        torch.mm,
        lambda d, rng: [Sample((arr(rng, d, (2, 3)), arr(rng, d, (3, 4))))],
        dtypes=FLOATS + ("complex64",),
    ),
    OpInfo(
        "bmm",
        staged.bmm,
        torch.bmm,
        lambda d, rng: [Sample((arr(rng, d, (2, 2, 3)), arr(rng, d, (2, 3, 4))))],
        dtypes=FLOATS + ("complex64",),
    ),
    OpInfo(
        "outer",
        staged.outer,
        torch.outer,
        lambda d, rng: [
            Sample((arr(rng, d, (3,)), arr(rng, d, (2,)))),
            Sample((arr(rng, d, (0,)), arr(rng, d, (2,)))),
        ],
        dtypes=INTS,
    ),
    OpInfo(
        "dot",
        staged.dot,
        torch.dot,
        lambda d, rng: [
            Sample((arr(rng, d, (3,)), arr(rng, d, (3,)))),
            Sample((arr(rng, d, (0,)), arr(rng, d, (0,)))),
        ],
        dtypes=INTS,
    ),
    OpInfo(
        "mv",
        staged.mv,
        torch.mv,
        lambda d, rng: [Sample((arr(rng, d, (2, 3)), arr(rng, d, (3,))))],
        dtypes=INTS,
    ),
    OpInfo(
        "addmm",
        staged.addmm,
        torch.addmm,
        lambda d, rng: [
            Sample((arr(rng, d, (3,)), arr(rng, d, (2, 4)), arr(rng, d, (4, 3)))),
            Sample(
                (arr(rng, d, (2, 3)), arr(rng, d, (2, 4)), arr(rng, d, (4, 3))),
                {"beta": 0.5, "alpha": 2.0},
            ),
            Sample((arr(rng, d, (2, 1)), arr(rng, d, (2, 4)), arr(rng, d, (4, 3))), {"beta": 0}),
        ],
    ),
    OpInfo(
        "baddbmm",
        staged.baddbmm,
        torch.baddbmm,
        lambda d, rng: [
            Sample(
                (arr(rng, d, (3,)), arr(rng, d, (2, 2, 4)), arr(rng, d, (2, 4, 3))), {"alpha": 0.5}
            )
        ],
    ),
    OpInfo("einsum", staged.einsum, torch.einsum, _einsum_samples),
    # softmax family and losses
    _real(
        "softmax",
        _many(((3, 4), 1), ((2, 3, 4), 0), ((), 0)),
        Skip("complex", "PyTorch's softmax has no complex kernel"),
    ),
    _real(
        "log_softmax",
        _many(((3, 4), 1), ((2, 3, 4), -1)),
        Skip("complex", "PyTorch's log_softmax has no complex kernel"),
    ),
    OpInfo(
        "scaled_dot_product_attention",
        F.scaled_dot_product_attention,
        _torch_sdpa_math,
        _sdpa_samples,
    ),
    OpInfo(
        "scaled_dot_product_attention_mask_causal",
        lambda *a, **k: F.scaled_dot_product_attention(*a, is_causal=True, **k),
        lambda *a, **k: TF.scaled_dot_product_attention(*a, is_causal=True, **k),
        lambda d, rng: _sdpa_samples(d, rng)[2:3],
        skips=[
            Skip(
                c,
                "torch adds a mask and is_causal only without autograd (its flash "
                "kernel); its math kernel, which autograd takes, refuses them",
            )
            for c in ("vjp", "jvp")
        ],
    ),
    OpInfo(
        "mse_loss",
        F.mse_loss,
        TF.mse_loss,
        _mse_samples,
        skips=[Skip("complex", "PyTorch's mse_loss has no complex kernel")],
    ),
    OpInfo(
        "cross_entropy",
        F.cross_entropy,
        TF.cross_entropy,
        _loss_samples,
        skips=[Skip("complex", "PyTorch's cross_entropy has no complex kernel")],
    ),
    OpInfo(
        "cross_entropy_weight",
        _weighted(F.cross_entropy, staged.tensor),
        _weighted(TF.cross_entropy, torch.tensor),
        lambda d, rng: _loss_samples(d, rng)[:1],
        skips=[Skip("complex", "PyTorch's cross_entropy has no complex kernel")],
    ),
    OpInfo(
        "nll_loss",
        lambda x, t, **kw: F.nll_loss(F.log_softmax(x, 1), t, **kw),
        lambda x, t, **kw: TF.nll_loss(TF.log_softmax(x, 1), t, **kw),
        _nll_samples,
        skips=[Skip("complex", "PyTorch's nll_loss has no complex kernel")],
    ),
]
