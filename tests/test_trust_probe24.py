"""Bad arguments against torch 2.13 (the twenty-fourth trust probe), every case run under
both libraries from the same inputs: pooling (max, average and Lp, 1-D to 3-D, adaptive),
``unfold``/``fold`` and the convolutions given a zero or negative kernel, stride, dilation
or padding, too much padding, an empty input, a zero divisor (staged raised Python's
ZeroDivisionError or NumPy's errors from inside, or gave a result); the losses given
integer, bool and complex tensors, which torch's kernels refuse (staged gave silent results
for several), inputs of other shapes and bogus reductions; errors of Tensor methods, Module
constructors and ``Generator.manual_seed``, which must name the user's line (staged's error
sites, Note [An error is sited once]); ranges into a bool ``out`` and integer ranges of
fractional steps; ``untyped_storage`` and ``set_``. An error staged raises must be torch's
type and message (or, with ``words``, hold those words of torch's), named once at this
file's line; a result must be torch's dtype, shape and values; the warnings torch's. The
strict xfails are faults; each ``reason`` gives both results."""

from __future__ import annotations

import math
import os
import re
import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import fault, message, same_outcome, same_tree

# float32 losses: staged's composites and torch's kernels round a handful of float32
# operations differently, each within half an ulp (2**-24 relative): a few ulps of the
# result at most, under 1e-6 relative; exact results (integers, bools) compare exactly
RTOL, ATOL = 1e-6, 1e-7

_rel = os.path.relpath(__file__)
_HERE = __file__ if _rel.startswith("..") else _rel  # as staged/_where.py names this file


def _tree(x):
    """Results as comparable Python values: tensors as ``(dtype, shape, values)``,
    generators and modules by their class name."""
    if isinstance(x, (staged.Tensor, torch.Tensor)):
        values = np.array(x.detach().resolve_conj().tolist())
        return (str(x.dtype).rpartition(".")[2], tuple(x.shape), values)
    if isinstance(x, (tuple, list)):
        return [_tree(v) for v in x]
    if isinstance(x, (staged.Generator, torch.Generator, staged.nn.Module, torch.nn.Module)):
        return type(x).__name__
    return x


def _tensor(ours, want, where) -> bool:
    if not (isinstance(want, tuple) and len(want) == 3 and isinstance(want[2], np.ndarray)):
        return False
    assert isinstance(ours, tuple) and ours[:2] == want[:2], (where, ours, want)
    if want[2].dtype.kind in "fc":
        np.testing.assert_allclose(ours[2], want[2], RTOL, ATOL, err_msg=where)
    else:
        np.testing.assert_array_equal(ours[2], want[2], err_msg=where)
    return True


def _same(ours, want) -> None:
    same_tree(ours, want, _tensor)


def _message(e) -> str:
    return message(e).replace("staged.", "torch.")


def _outcome(case, L):
    """What ``case(L)`` gives (its results, or the type and message of what it raised, and
    the message as raised), with the warnings it gave."""
    raw = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = "ok", _tree(case(L))
        except Exception as e:  # the exception type and message are what is compared
            got, raw = ("raised", (type(e), _message(e))), str(e)
    return got, raw, [(w.category, _message(w.message)) for w in caught]


def check(case, words: str | None = None) -> None:
    """``case`` gives torch's results and warnings under staged, or raises torch's error,
    named at this file's line once."""
    ours, raw, ours_w = _outcome(case, staged)
    want, _, want_w = _outcome(case, torch)
    same_outcome(ours, want, words, _same)
    if raw is not None:
        assert raw.startswith(_HERE + ":"), raw  # the user's line ...
        assert raw.count(_HERE + ":") == 1, raw  # ... once
    assert ours_w == want_w, (ours_w, want_w)


def _cases(table, faults=()):
    return [fault(n, faults[n]) if n in faults else n for n in table]


def _x(L, *shape, dtype=None):
    """0, 1, 2, ... of ``shape`` (float32 unless ``dtype`` says)."""
    n = math.prod(shape)
    return L.arange(n, dtype=dtype or L.float32).reshape(shape)


def F(L):
    return L.nn.functional


# --- pooling, unfold/fold, convolutions given bad geometry ---------------------------------
POOLS = {
    # max_pool1d (torch's own checks, without indices; with them, 2-D ones of height 1)
    "max_pool1d stride 0": lambda L: F(L).max_pool1d(_x(L, 1, 2, 8), 2, stride=0),
    "max_pool1d kernel 0": lambda L: F(L).max_pool1d(_x(L, 1, 2, 8), 0),
    "max_pool1d padding -1": lambda L: F(L).max_pool1d(_x(L, 1, 2, 8), 2, padding=-1),
    "max_pool1d padding 2": lambda L: F(L).max_pool1d(_x(L, 1, 2, 8), 2, padding=2),
    "max_pool1d dilation 0": lambda L: F(L).max_pool1d(_x(L, 1, 2, 8), 2, dilation=0),
    "max_pool1d too small": lambda L: F(L).max_pool1d(_x(L, 1, 2, 1), 3),
    "max_pool1d empty channels": lambda L: F(L).max_pool1d(_x(L, 1, 0, 8), 2),
    "max_pool1d empty length": lambda L: F(L).max_pool1d(_x(L, 1, 2, 0), 2),
    "max_pool1d requiring grad, stride 0": lambda L: F(L).max_pool1d(
        _x(L, 1, 2, 8).requires_grad_(), 2, stride=0
    ),
    "max_pool1d indices, kernel 0": lambda L: F(L).max_pool1d(
        _x(L, 1, 2, 8), 0, stride=1, return_indices=True
    ),
    "max_pool1d indices, too small": lambda L: F(L).max_pool1d(
        _x(L, 1, 2, 1), 3, return_indices=True
    ),
    "max_pool1d unbatched, stride 0": lambda L: F(L).max_pool1d(_x(L, 2, 8), 2, stride=0),
    # max_pool2d / max_pool3d
    "max_pool2d stride 0": lambda L: F(L).max_pool2d(_x(L, 1, 2, 8, 8), 2, stride=0),
    "max_pool2d kernel 0": lambda L: F(L).max_pool2d(_x(L, 1, 2, 8, 8), 0),
    "max_pool2d kernel 0, stride 1": lambda L: F(L).max_pool2d(_x(L, 1, 2, 8, 8), 0, stride=1),
    "max_pool2d stride -1": lambda L: F(L).max_pool2d(_x(L, 1, 2, 8, 8), 2, stride=-1),
    "max_pool2d padding -1": lambda L: F(L).max_pool2d(_x(L, 1, 2, 8, 8), 2, padding=-1),
    "max_pool2d dilation 0": lambda L: F(L).max_pool2d(_x(L, 1, 2, 8, 8), 2, dilation=0),
    "max_pool2d dilated padding": lambda L: F(L).max_pool2d(
        _x(L, 1, 2, 8, 8), 2, padding=2, dilation=3
    ),
    "max_pool2d empty channels": lambda L: F(L).max_pool2d(_x(L, 1, 0, 4, 4), 2),
    "max_pool2d unbatched, stride 0": lambda L: F(L).max_pool2d(_x(L, 2, 8, 8), 2, stride=0),
    "max_pool2d indices, stride 0": lambda L: F(L).max_pool2d(
        _x(L, 1, 2, 8, 8), 2, stride=0, return_indices=True
    ),
    "MaxPool2d kernel 0": lambda L: L.nn.MaxPool2d(0)(_x(L, 1, 2, 8, 8)),
    "max_pool3d stride 0": lambda L: F(L).max_pool3d(_x(L, 1, 2, 4, 4, 4), 2, stride=0),
    "max_pool3d kernel 0, stride 1": lambda L: F(L).max_pool3d(_x(L, 1, 2, 4, 4, 4), 0, stride=1),
    "max_pool3d dilation 0": lambda L: F(L).max_pool3d(_x(L, 1, 2, 4, 4, 4), 2, dilation=0),
    "max_pool3d empty": lambda L: F(L).max_pool3d(_x(L, 1, 0, 4, 4, 4), 2),
    "max_pool3d too small": lambda L: F(L).max_pool3d(_x(L, 1, 2, 1, 4, 4), 2),
    "max_pool3d dilated padding (fine)": lambda L: F(L).max_pool3d(
        _x(L, 1, 2, 4, 4, 4), 2, padding=1, dilation=2
    ),
    # average pooling
    "avg_pool1d stride 0": lambda L: F(L).avg_pool1d(_x(L, 1, 2, 8), 2, stride=0),
    "avg_pool1d kernel 0": lambda L: F(L).avg_pool1d(_x(L, 1, 2, 8), 0),
    "avg_pool1d kernel 0, stride 1": lambda L: F(L).avg_pool1d(_x(L, 1, 2, 8), 0, stride=1),
    "avg_pool1d empty": lambda L: F(L).avg_pool1d(_x(L, 1, 0, 8), 2),
    "avg_pool1d padding 2": lambda L: F(L).avg_pool1d(_x(L, 1, 2, 8), 2, padding=2),
    "avg_pool2d stride 0": lambda L: F(L).avg_pool2d(_x(L, 1, 2, 8, 8), 2, stride=0),
    "avg_pool2d kernel 0, stride 1": lambda L: F(L).avg_pool2d(_x(L, 1, 2, 8, 8), 0, stride=1),
    "avg_pool2d padding -1": lambda L: F(L).avg_pool2d(_x(L, 1, 2, 8, 8), 2, padding=-1),
    "avg_pool2d divisor 0": lambda L: F(L).avg_pool2d(_x(L, 1, 2, 8, 8), 2, divisor_override=0),
    "avg_pool2d divisor 0, stride 0": lambda L: F(L).avg_pool2d(
        _x(L, 1, 2, 8, 8), 2, stride=0, divisor_override=0
    ),
    "avg_pool3d stride 0": lambda L: F(L).avg_pool3d(_x(L, 1, 2, 4, 4, 4), 2, stride=0),
    "avg_pool3d kernel 0, stride 1": lambda L: F(L).avg_pool3d(_x(L, 1, 2, 4, 4, 4), 0, stride=1),
    "avg_pool3d divisor 0": lambda L: F(L).avg_pool3d(_x(L, 1, 2, 4, 4, 4), 2, divisor_override=0),
    "avg_pool3d input under the kernel": lambda L: F(L).avg_pool3d(_x(L, 1, 2, 1, 4, 4), 2),
    "avg_pool3d empty": lambda L: F(L).avg_pool3d(_x(L, 1, 0, 4, 4, 4), 2),
    "lp_pool1d stride 0": lambda L: F(L).lp_pool1d(_x(L, 1, 2, 8), 2, 2, stride=0),
    "lp_pool1d kernel 0": lambda L: F(L).lp_pool1d(_x(L, 1, 2, 8), 2, 0),
    "lp_pool2d stride 0": lambda L: F(L).lp_pool2d(_x(L, 1, 2, 8, 8), 2, 2, stride=0),
    "lp_pool3d stride 0": lambda L: F(L).lp_pool3d(_x(L, 1, 2, 4, 4, 4), 2, 2, stride=0),
    # adaptive pooling: a zero output size is fine, an empty input not (average)
    "adaptive_avg_pool1d to 0": lambda L: F(L).adaptive_avg_pool1d(_x(L, 1, 2, 8), 0),
    "adaptive_max_pool2d to 0": lambda L: F(L).adaptive_max_pool2d(_x(L, 1, 2, 8, 8), 0),
    "adaptive_avg_pool3d to 0": lambda L: F(L).adaptive_avg_pool3d(_x(L, 1, 2, 4, 4, 4), 0),
    "adaptive_avg_pool1d to -1": lambda L: F(L).adaptive_avg_pool1d(_x(L, 1, 2, 3), -1),
    "adaptive_avg_pool3d to -1": lambda L: F(L).adaptive_avg_pool3d(_x(L, 1, 2, 3, 3, 3), -1),
    "adaptive_max_pool1d to -1": lambda L: F(L).adaptive_max_pool1d(_x(L, 1, 2, 3), -1),
    "adaptive_max_pool2d to -1": lambda L: F(L).adaptive_max_pool2d(_x(L, 1, 2, 3, 3), -1),
    "adaptive_avg_pool1d empty length": lambda L: F(L).adaptive_avg_pool1d(_x(L, 1, 2, 0), 2),
    "adaptive_avg_pool1d empty channels (fine)": lambda L: F(L).adaptive_avg_pool1d(
        _x(L, 1, 0, 3), 2
    ),
    "adaptive_avg_pool2d empty height": lambda L: F(L).adaptive_avg_pool2d(_x(L, 1, 2, 0, 8), 2),
    "adaptive_avg_pool2d unbatched, empty": lambda L: F(L).adaptive_avg_pool2d(_x(L, 2, 3, 0), 2),
    "adaptive_avg_pool3d empty channels": lambda L: F(L).adaptive_avg_pool3d(_x(L, 2, 0, 3, 3), 2),
    "adaptive_avg_pool3d empty batch (fine)": lambda L: F(L).adaptive_avg_pool3d(
        _x(L, 0, 2, 3, 3, 3), 2
    ),
    # unfold (im2col) and fold (col2im), each with its own order of checks
    "unfold stride 0": lambda L: F(L).unfold(_x(L, 1, 2, 8, 8), 2, stride=0),
    "unfold kernel 0": lambda L: F(L).unfold(_x(L, 1, 2, 8, 8), 0),
    "unfold kernel 0, stride 0": lambda L: F(L).unfold(_x(L, 1, 2, 8, 8), 0, stride=0),
    "unfold stride 0, padding -1": lambda L: F(L).unfold(
        _x(L, 1, 2, 8, 8), 2, stride=0, padding=-1
    ),
    "unfold dilation 0": lambda L: F(L).unfold(_x(L, 1, 2, 8, 8), 2, dilation=0),
    "unfold padding -1": lambda L: F(L).unfold(_x(L, 1, 2, 8, 8), 2, padding=-1),
    "unfold kernel over the input": lambda L: F(L).unfold(_x(L, 1, 2, 8, 8), 9),
    "unfold empty": lambda L: F(L).unfold(_x(L, 1, 0, 8, 8), 2),
    "unfold unbatched": lambda L: F(L).unfold(_x(L, 2, 8, 8), 2),
    "fold stride 0": lambda L: F(L).fold(_x(L, 1, 8, 16), (5, 5), 2, stride=0),
    "fold kernel 0": lambda L: F(L).fold(_x(L, 1, 8, 16), (5, 5), 0),
    "fold blocks": lambda L: F(L).fold(_x(L, 1, 8, 15), (5, 5), 2),
    # convolutions
    "conv1d stride 0": lambda L: F(L).conv1d(_x(L, 1, 2, 8), _x(L, 3, 2, 3), stride=0),
    "conv1d dilation 0": lambda L: F(L).conv1d(_x(L, 1, 2, 8), _x(L, 3, 2, 3), dilation=0),
    "conv2d dilation 0": lambda L: F(L).conv2d(_x(L, 1, 2, 8, 8), _x(L, 3, 2, 3, 3), dilation=0),
    "conv2d dilation -1": lambda L: F(L).conv2d(_x(L, 1, 2, 8, 8), _x(L, 3, 2, 3, 3), dilation=-1),
    "conv2d dilation (1, 0)": lambda L: F(L).conv2d(
        _x(L, 1, 2, 8, 8), _x(L, 3, 2, 3, 3), dilation=(1, 0)
    ),
    "conv2d stride 0, dilation 0": lambda L: F(L).conv2d(
        _x(L, 1, 2, 8, 8), _x(L, 3, 2, 3, 3), stride=0, dilation=0
    ),
    "conv2d padding -1": lambda L: F(L).conv2d(_x(L, 1, 2, 8, 8), _x(L, 3, 2, 3, 3), padding=-1),
    "conv2d same, dilation 0": lambda L: F(L).conv2d(
        _x(L, 1, 2, 8, 8), _x(L, 3, 2, 3, 3), padding="same", dilation=0
    ),
    "conv2d same, stride 2": lambda L: F(L).conv2d(
        _x(L, 1, 2, 8, 8), _x(L, 3, 2, 3, 3), padding="same", stride=2
    ),
    "conv2d padding 'bogus'": lambda L: F(L).conv2d(
        _x(L, 1, 2, 8, 8), _x(L, 3, 2, 3, 3), padding="bogus"
    ),
    "conv2d groups not dividing": lambda L: F(L).conv2d(
        _x(L, 1, 4, 8, 8), _x(L, 3, 2, 3, 3), groups=2
    ),
    "conv2d groups 0": lambda L: F(L).conv2d(_x(L, 1, 2, 8, 8), _x(L, 3, 2, 3, 3), groups=0),
    "conv3d dilation 0": lambda L: F(L).conv3d(
        _x(L, 1, 2, 4, 4, 4), _x(L, 3, 2, 3, 3, 3), dilation=0
    ),
    "conv_transpose1d dilation 0": lambda L: F(L).conv_transpose1d(
        _x(L, 1, 2, 8), _x(L, 2, 3, 3), dilation=0
    ),
    "conv_transpose2d dilation 0": lambda L: F(L).conv_transpose2d(
        _x(L, 1, 2, 8, 8), _x(L, 2, 3, 3, 3), dilation=0
    ),
    "conv_transpose2d dilation -1": lambda L: F(L).conv_transpose2d(
        _x(L, 1, 2, 8, 8), _x(L, 2, 3, 3, 3), dilation=-1
    ),
    "conv_transpose3d dilation 0": lambda L: F(L).conv_transpose3d(
        _x(L, 1, 2, 4, 4, 4), _x(L, 2, 3, 3, 3, 3), dilation=0
    ),
    "conv_transpose2d stride 0": lambda L: F(L).conv_transpose2d(
        _x(L, 1, 2, 8, 8), _x(L, 2, 3, 3, 3), stride=0
    ),
}


@pytest.mark.parametrize("name", _cases(POOLS))
def test_pooling_and_convolution_geometry(name):
    check(POOLS[name])


# --- losses of integer, bool and complex tensors ---------------------------------------------
_A, _B = [[0, 1, 2], [1, 0, 1]], [[1, 1, 0], [0, 0, 1]]
DTYPES = {  # input's and target's
    "int64": ("int64", "int64"),
    "bool": ("bool", "bool"),
    "int64 input": ("int64", "float32"),
    "int64 target": ("float32", "int64"),
    "int32": ("int32", "int32"),
    "bool target": ("float32", "bool"),
    "complex64": ("complex64", "complex64"),
}
LOSSES = {
    "l1_loss": lambda L, a, b, r: F(L).l1_loss(a, b, reduction=r),
    "mse_loss": lambda L, a, b, r: F(L).mse_loss(a, b, reduction=r),
    "smooth_l1_loss": lambda L, a, b, r: F(L).smooth_l1_loss(a, b, reduction=r),
    "huber_loss": lambda L, a, b, r: F(L).huber_loss(a, b, reduction=r),
    "soft_margin_loss": lambda L, a, b, r: F(L).soft_margin_loss(a, b, reduction=r),
    "binary_cross_entropy": lambda L, a, b, r: F(L).binary_cross_entropy(a, b, reduction=r),
    "binary_cross_entropy_with_logits": lambda L, a, b, r: F(L).binary_cross_entropy_with_logits(
        a, b, reduction=r
    ),
    "hinge_embedding_loss": lambda L, a, b, r: F(L).hinge_embedding_loss(a, b, reduction=r),
    "multilabel_soft_margin_loss": lambda L, a, b, r: F(L).multilabel_soft_margin_loss(
        a, b, reduction=r
    ),
    "poisson_nll_loss": lambda L, a, b, r: F(L).poisson_nll_loss(a, b, reduction=r),
    "kl_div": lambda L, a, b, r: F(L).kl_div(a, b, reduction=r),
    "margin_ranking_loss": lambda L, a, b, r: F(L).margin_ranking_loss(
        a, b, L.ones_like(b), reduction=r
    ),
    "gaussian_nll_loss": lambda L, a, b, r: F(L).gaussian_nll_loss(
        a, b, L.ones_like(b), reduction=r
    ),
    "cosine_embedding_loss": lambda L, a, b, r: F(L).cosine_embedding_loss(
        a, b, L.ones(2, dtype=L.int64), reduction=r
    ),
    "triplet_margin_loss": lambda L, a, b, r: F(L).triplet_margin_loss(a, b, b, reduction=r),
}
LOSS_CASES = {
    f"{loss} of {kind}, {r}": (loss, kind, r)
    for loss in LOSSES
    for kind in DTYPES
    for r in ("mean", "sum", "none")
}
_HINGE = (
    "torch computes hinge_embedding_loss in an integer input's dtype (its mean then refuses "
    "it, its sum and 'none' give integers); staged's where(..., 0.0) gives float32: change "
    "hinge_embedding_loss in staged/nn/functional.py"
)
LOSS_FAULTS = {
    **{
        f"hinge_embedding_loss of {kind}, {r}": _HINGE
        for kind in ("int64", "int64 input", "int32")
        for r in ("mean", "sum", "none")
    },
    **{
        f"hinge_embedding_loss of bool, {r}": "both refuse bool - bool; torch's words are "
        "'with two bool tensors', staged's 'with a bool tensor' (margin - x, in the other order)"
        for r in ("mean", "sum", "none")
    },
    **{
        f"binary_cross_entropy_with_logits of bool target, {r}": "both refuse 1 - y of a bool "
        "y; torch's C++ words it 'with two bool tensors', staged 'with a bool tensor'"
        for r in ("mean", "sum", "none")
    },
    **{
        f"{loss} of complex64, {r}": f"torch computes {loss} of complex tensors; staged "
        "refuses them (softplus of a complex, clamp_min of a complex variance)"
        for loss in ("soft_margin_loss", "gaussian_nll_loss")
        for r in ("mean", "sum", "none")
    },
}


@pytest.mark.parametrize("name", _cases(LOSS_CASES, LOSS_FAULTS))
def test_a_loss_of_integer_bool_or_complex_tensors(name):
    loss, kind, r = LOSS_CASES[name]
    a, b = DTYPES[kind]

    def case(L):
        x, y = L.tensor(np.array(_A).astype(a)), L.tensor(np.array(_B).astype(b))
        return LOSSES[loss](L, x, y, r)

    check(case)


LOSS_ARGUMENTS = {
    "mse_loss broadcast (warns)": lambda L: F(L).mse_loss(_x(L, 2, 3), _x(L, 1, 3)),
    "mse_loss sizes that do not broadcast": lambda L: F(L).mse_loss(_x(L, 2, 3), _x(L, 4, 3)),
    "l1_loss broadcast (warns)": lambda L: F(L).l1_loss(_x(L, 2, 3), _x(L, 1, 3)),
    "smooth_l1_loss broadcast (warns)": lambda L: F(L).smooth_l1_loss(_x(L, 2, 3), _x(L, 1, 3)),
    "huber_loss broadcast (warns)": lambda L: F(L).huber_loss(_x(L, 2, 3), _x(L, 1, 3)),
    "binary_cross_entropy sizes": lambda L: F(L).binary_cross_entropy(
        _x(L, 2, 3) / 10, _x(L, 1, 3) / 10
    ),
    "binary_cross_entropy_with_logits sizes": lambda L: F(L).binary_cross_entropy_with_logits(
        _x(L, 2, 3), _x(L, 1, 3)
    ),
    "mse_loss reduction 'bogus'": lambda L: F(L).mse_loss(_x(L, 3), _x(L, 3), reduction="bogus"),
    "kl_div reduction 'bogus'": lambda L: F(L).kl_div(_x(L, 3), _x(L, 3), reduction="bogus"),
    "poisson_nll_loss reduction 'bogus'": lambda L: F(L).poisson_nll_loss(
        _x(L, 3), _x(L, 3), reduction="bogus"
    ),
    "cross_entropy reduction 'bogus'": lambda L: F(L).cross_entropy(
        _x(L, 2, 3), L.tensor([0, 1]), reduction="bogus"
    ),
    "nll_loss reduction 'bogus'": lambda L: F(L).nll_loss(
        _x(L, 2, 3), L.tensor([0, 1]), reduction="bogus"
    ),
    "cross_entropy of an int64 input": lambda L: F(L).cross_entropy(
        _x(L, 2, 3, dtype=L.int64), L.tensor([0, 1])
    ),
    "multi_margin_loss of int64": lambda L: F(L).multi_margin_loss(
        _x(L, 2, 3, dtype=L.int64), L.tensor([0, 1])
    ),
    "multilabel_margin_loss of int64": lambda L: F(L).multilabel_margin_loss(
        _x(L, 2, 3, dtype=L.int64), L.tensor([[0, 1, -1], [1, -1, 0]])
    ),
    "kl_div log_target of int64": lambda L: F(L).kl_div(
        _x(L, 3, dtype=L.int64), _x(L, 3), reduction="sum", log_target=True
    ),
}


@pytest.mark.parametrize("name", _cases(LOSS_ARGUMENTS))
def test_a_loss_of_other_sizes_or_a_bogus_reduction(name):
    check(LOSS_ARGUMENTS[name])


# --- errors naming the user's line: Tensor methods, constructors, generators ----------------
SITED = {
    "size(5)": lambda L: _x(L, 2, 3).size(5),
    "size(-3)": lambda L: _x(L, 2, 3).size(-3),
    "size(0) of a 0-d tensor": lambda L: L.tensor(1.0).size(0),
    "size(1.5)": lambda L: _x(L, 2, 3).size(1.5),
    "stride(5)": lambda L: _x(L, 2, 3).stride(5),
    "stride('a')": lambda L: _x(L, 2, 3).stride("a"),
    "item of 6 elements": lambda L: _x(L, 2, 3).item(),
    "bool of 6 elements": lambda L: bool(_x(L, 2, 3)),
    "float of 6 elements": lambda L: float(_x(L, 2, 3)),
    "new_empty(-1)": lambda L: _x(L, 2).new_empty(-1),
    "new_full((-1,), 2)": lambda L: _x(L, 2).new_full((-1,), 2),
    "new_ones(-2)": lambda L: _x(L, 2).new_ones(-2),
    "new_tensor of ragged lists": lambda L: _x(L, 2).new_tensor([[1], [1, 2]]),
    "requires_grad_ of int64": lambda L: L.arange(3).requires_grad_(),
    "requires_grad = True of int64": lambda L: setattr(L.arange(3), "requires_grad", True),
    "register_hook without grad": lambda L: _x(L, 2).register_hook(lambda g: g),
    "register_post_accumulate_grad_hook without grad": lambda L: _x(
        L, 2
    ).register_post_accumulate_grad_hook(lambda t: None),
    "retain_grad without grad": lambda L: _x(L, 2).retain_grad(),
    "detach_ of a view": lambda L: _x(L, 2, 3).requires_grad_()[0].detach_(),
    "backward without grad": lambda L: _x(L, 2).sum().backward(),
    "uniform_(2, 1)": lambda L: _x(L, 2).uniform_(2, 1),
    "normal_(0, -1)": lambda L: _x(L, 2).normal_(0, -1),
    "random_(5, 2)": lambda L: _x(L, 2).random_(5, 2),
    "bernoulli_(2)": lambda L: _x(L, 2).bernoulli_(2),
    "exponential_(-1)": lambda L: _x(L, 2).exponential_(-1),
    "geometric_(2)": lambda L: _x(L, 2).geometric_(2),
    "cauchy_(0, -1)": lambda L: _x(L, 2).cauchy_(0, -1),
    "log_normal_(0, -1)": lambda L: _x(L, 2).log_normal_(0, -1),
    "multinomial of too many": lambda L: _x(L, 2, 3).multinomial(5),
    "type('bogus')": lambda L: _x(L, 2).type("bogus"),
    "to('bogus')": lambda L: _x(L, 2).to("bogus"),
    "polygamma(-1)": lambda L: _x(L, 2).polygamma(-1),
    "equal(5)": lambda L: _x(L, 2).equal(5),
    "type_as(5)": lambda L: _x(L, 2).type_as(5),
    "neg of bool": lambda L: -L.tensor([True, False]),
    "bool - bool": lambda L: L.tensor([True, False]) - L.tensor([False, False]),
    "Linear(-1, 2)": lambda L: L.nn.Linear(-1, 2),
    "Linear(2, -1)": lambda L: L.nn.Linear(2, -1),
    "Linear(2.5, 2)": lambda L: L.nn.Linear(2.5, 2),
    "Bilinear(-1, 2, 3)": lambda L: L.nn.Bilinear(-1, 2, 3),
    "Conv2d(-3, 4, 3)": lambda L: L.nn.Conv2d(-3, 4, 3),
    "Conv2d groups not dividing": lambda L: L.nn.Conv2d(3, 4, 3, groups=2),
    "Conv2d groups 0": lambda L: L.nn.Conv2d(3, 4, 3, groups=0),
    "Conv2d padding 'bogus'": lambda L: L.nn.Conv2d(4, 4, 3, padding="bogus"),
    "Conv2d same, stride 2": lambda L: L.nn.Conv2d(4, 4, 3, padding="same", stride=2),
    "Conv2d(3, 4, 0) (fine)": lambda L: L.nn.Conv2d(3, 4, 0),
    "Dropout(p=1.5)": lambda L: L.nn.Dropout(p=1.5),
    "Dropout2d(p=-0.1)": lambda L: L.nn.Dropout2d(p=-0.1),
    "Embedding(-1, 3)": lambda L: L.nn.Embedding(-1, 3),
    "Embedding(0, 3) (fine)": lambda L: L.nn.Embedding(0, 3).weight,
    "LayerNorm(-1)": lambda L: L.nn.LayerNorm(-1),
    "BatchNorm1d(-1)": lambda L: L.nn.BatchNorm1d(-1),
    "GroupNorm(3, 4)": lambda L: L.nn.GroupNorm(3, 4),
    "LSTM(3, -1)": lambda L: L.nn.LSTM(3, -1),
    "LSTM dropout 1.5": lambda L: L.nn.LSTM(3, 4, dropout=1.5),
    "LSTM of 0 layers": lambda L: L.nn.LSTM(3, 4, num_layers=0),
    "Generator().manual_seed(1.5)": lambda L: L.Generator().manual_seed(1.5),
    "Generator().manual_seed('a')": lambda L: L.Generator().manual_seed("a"),
    "Generator().manual_seed(2**64)": lambda L: L.Generator().manual_seed(2**64),
    "Generator().manual_seed(-2**63 - 1)": lambda L: L.Generator().manual_seed(-(2**63) - 1),
    "Generator().manual_seed(tensor)": lambda L: L.Generator().manual_seed(L.tensor(3)),
    "Generator().manual_seed(True)": lambda L: L.Generator().manual_seed(True),
    "Generator().manual_seed(-5) (fine)": lambda L: L.Generator().manual_seed(-5).initial_seed(),
    "manual_seed('a')": lambda L: L.manual_seed("a"),
    "manual_seed(2**64)": lambda L: L.manual_seed(2**64),
}


# torch's words where the whole message cannot match: its set printed in hash order, the
# path of its own optimizer module
SITED_WORDS = {
    "Conv2d padding 'bogus'": "Invalid padding string 'bogus', should be one of {",
    "detach_ of a view": "Can't detach views in-place. Use detach() instead.",
}


@pytest.mark.parametrize("name", _cases(SITED))
def test_an_error_of_a_method_constructor_or_generator_names_the_users_line(name):
    check(SITED[name], SITED_WORDS.get(name))


# --- ranges into a bool out, integer ranges of fractional steps; storages, set_ -------------
def _into(L, dtype, fn):
    """``fn(out)`` into a new empty ``out`` of ``dtype``: whether it gave ``out`` back."""
    out = L.empty(0, dtype=dtype)
    got = fn(out)
    return got is out, got


RANGES = {
    "arange(3) into bool": lambda L: _into(L, L.bool, lambda o: L.arange(3, out=o)),
    "arange(0, 2) into bool": lambda L: _into(L, L.bool, lambda o: L.arange(0, 2, out=o)),
    "arange(3, dtype=bool)": lambda L: L.arange(3, dtype=L.bool),
    "arange(0, 1, 0.3, dtype=bool)": lambda L: L.arange(0, 1, 0.3, dtype=L.bool),
    "arange(0, 2, 0.5) into uint8": lambda L: _into(
        L, L.uint8, lambda o: L.arange(0, 2, 0.5, out=o)
    ),
    "arange(0, 2, 0.5) into float32": lambda L: _into(
        L, L.float32, lambda o: L.arange(0, 2, 0.5, out=o)
    ),
    "linspace into bool": lambda L: _into(L, L.bool, lambda o: L.linspace(0, 1, 3, out=o)),
    "logspace(dtype=bool)": lambda L: L.logspace(0, 1, 3, dtype=L.bool),
    "arange(0, 2, 0.5, dtype=int64)": lambda L: L.arange(0, 2, 0.5, dtype=L.int64),
    "arange(0, 2, 0.5, dtype=int16)": lambda L: L.arange(0, 2, 0.5, dtype=L.int16),
    "arange(0, 3, 1.5, dtype=int32)": lambda L: L.arange(0, 3, 1.5, dtype=L.int32),
    "arange(0, 3, 1.5, dtype=int64)": lambda L: L.arange(0, 3, 1.5, dtype=L.int64),
    "arange(0.5, 3.7, 1.2, dtype=int32)": lambda L: L.arange(0.5, 3.7, 1.2, dtype=L.int32),
    "arange(0.5, 3.7, 1.2, dtype=int64)": lambda L: L.arange(0.5, 3.7, 1.2, dtype=L.int64),
    "arange(5, 0.5, -1.5, dtype=int64)": lambda L: L.arange(5, 0.5, -1.5, dtype=L.int64),
    "arange(5, 0.5, -1.5, dtype=int32)": lambda L: L.arange(5, 0.5, -1.5, dtype=L.int32),
    "arange(-2.5, 2, 1, dtype=int8)": lambda L: L.arange(-2.5, 2, 1, dtype=L.int8),
    "arange(-2.5, 2, 1, dtype=int64)": lambda L: L.arange(-2.5, 2, 1, dtype=L.int64),
    "arange(7, dtype=int64)": lambda L: L.arange(7, dtype=L.int64),
    "arange(10, 0, -3)": lambda L: L.arange(10, 0, -3),
}


@pytest.mark.parametrize("name", _cases(RANGES))
def test_a_range(name):
    check(RANGES[name])


def _storage_facts(t, base):
    """What ``t.untyped_storage()`` says, and whether it starts at ``base``'s memory."""
    s = t.untyped_storage()
    return s.nbytes(), s.size(), len(s), s.element_size(), s.data_ptr() == base.data_ptr()


def _set_and_write(L, make):
    """``a.set_(...)`` by ``make(a, b)`` for a new ``a`` and ``b = 0, 1, 2...``; then ``b``
    written: what ``a`` sees, its version and its storage's start."""
    a, b = L.zeros(2), L.arange(6.0)
    v = a._version
    got = make(a, b)
    b.add_(10)
    return got is a, a, a._version - v, a.untyped_storage().data_ptr() == b.data_ptr()


STORAGES = {
    "untyped_storage": lambda L: (lambda t: _storage_facts(t, t))(L.arange(6.0)),
    "untyped_storage of a view": lambda L: (lambda t: _storage_facts(t[2:], t))(L.arange(6.0)),
    "untyped_storage of a transpose": lambda L: (lambda t: _storage_facts(t.t(), t))(
        _x(L, 2, 3, dtype=L.float64)
    ),
    "untyped_storage of int16": lambda L: (lambda t: _storage_facts(t, t))(
        L.arange(5, dtype=L.int16)
    ),
    "untyped_storage bytes": lambda L: L.tensor([1, 256], dtype=L.int16).untyped_storage().tolist(),
    "untyped_storage device": lambda L: str(L.arange(3).untyped_storage().device),
    "set_(tensor)": lambda L: _set_and_write(L, lambda a, b: a.set_(b)),
    "set_(tensor, offset, size, stride)": lambda L: _set_and_write(
        L, lambda a, b: a.set_(b, 1, (2, 2), (1, 2))
    ),
    "set_(storage, offset, size)": lambda L: _set_and_write(
        L, lambda a, b: a.set_(b.untyped_storage(), 2, (3,))
    ),
    "set_(storage)": lambda L: _set_and_write(L, lambda a, b: a.set_(b.untyped_storage())),
    "set_()": lambda L: (lambda a: (a.set_(), a._version))(L.arange(3.0)),
    "set_ of another dtype": lambda L: L.zeros(2).set_(L.ones(3, dtype=L.int64)),
    "set_ of a leaf requiring grad": lambda L: L.zeros(2, requires_grad=True).set_(L.ones(3)),
}


@pytest.mark.parametrize("name", _cases(STORAGES))
def test_storages_and_set_(name):
    words = {"set_ of a leaf requiring grad": "a leaf Variable that requires grad"}
    check(STORAGES[name], words.get(name))


def test_set_of_an_int_is_torchs_type_error():
    check(lambda L: L.zeros(2).set_(5), "set_() received an invalid combination of arguments")


def test_set_of_a_tensor_requiring_grad_says_what_to_use():
    """torch records a ``NotImplemented`` node for it; staged refuses it with the two ways
    that work."""
    with pytest.raises(NotImplementedError, match=re.escape("x.set_(source.detach())")):
        staged.zeros(2).set_(staged.ones(3, requires_grad=True))
