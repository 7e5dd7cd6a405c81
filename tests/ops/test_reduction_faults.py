"""Reductions and elementwise ops against torch 2.13 where the fourth trust probe found
them wrong: gradients at NaN, infinities and zero degrees of freedom (full max/min, prod,
var), half-precision cumprod, nanmedian of all-NaN rows, and the exception torch raises
for empty reductions and for dtypes it has no kernel for."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import staged
import staged.autograd.forward_ad as sfw
from tests.checks import to_numpy

# NumPy's 0 / 0 and torch's "degrees of freedom is <= 0" warnings
pytestmark = [
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

nan, inf = math.nan, math.inf


def _np(t):
    """``t`` as an array (bfloat16, which NumPy lacks, as float32)."""
    return to_numpy(t.float() if str(t.dtype).endswith("bfloat16") else t)


def _grad(lib, fn, values, dtype="float32"):
    x = lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True)
    fn(x).backward()
    return _np(x.grad)


GRADIENTS = {
    # full max/min: torch's evenly_distribute_backward (ties, or the NaN entries)
    "max_nan_last": (lambda x: x.max(), [1.0, 3.0, nan]),
    "max_two_nans": (lambda x: x.max(), [nan, 1.0, nan]),
    "min_two_nans": (lambda x: x.min(), [[nan, 1.0], [2.0, nan]]),
    "max_inf_ties": (lambda x: x.max(), [inf, 1.0, inf]),
    "min_ties": (lambda x: x.min(), [2.0, 5.0, 2.0, 2.0]),
    # amax keeps its own rule: NaN everywhere once the result is NaN
    "amax_nan": (lambda x: x.amax(), [nan, 1.0, nan]),
    "amin_nan_dim": (lambda x: x.amin(0).sum(), [[nan, 1.0], [2.0, 3.0]]),
    # prod_backward: the product of the others, an infinity not divided by itself
    "prod_inf_and_zero": (lambda x: x.prod(), [inf, 0.0, 2.0]),
    "prod_neg_inf_and_zero": (lambda x: x.prod(), [-inf, 0.0, 2.0, 3.0]),
    "prod_nan_and_zero": (lambda x: x.prod(), [nan, 0.0, 2.0]),
    "prod_two_infs_and_zero": (lambda x: x.prod(), [inf, 0.0, inf]),
    "prod_inf_no_zero": (lambda x: x.prod(), [inf, 1.0, 2.0]),
    "prod_dim_inf_and_zero": (lambda x: x.prod(1).sum(), [[inf, 0.0, 2.0], [0.0, 1.0, 5.0]]),
    # a zero anywhere: torch multiplies the others in zero-free slices too (no inf / inf)
    "prod_dim_zero_elsewhere": (lambda x: x.prod(1).sum(), [[1.0, 0.0, 2.0], [inf, 2.0, 1.0]]),
    "prod_dim_no_zero": (lambda x: x.prod(1).sum(), [[1.0, 3.0, 2.0], [inf, 2.0, 1.0]]),
    # var with n <= correction: inf or NaN (whole tensor), 2 / (n - c) * (x - mean) along dims
    "var_whole_dof_negative": (lambda x: x.var(correction=3), [2.0, 3.0]),
    "var_whole_dof_zero": (lambda x: x.var(correction=2), [2.0, 3.0]),
    "var_whole_equal": (lambda x: x.var(correction=3), [2.0, 2.0]),
    "var_dim_dof_negative": (lambda x: x.var(0, correction=3).sum(), [[2.0, 3.0], [3.0, 2.0]]),
    "var_dim_dof_zero": (lambda x: x.var(0, correction=2).sum(), [[2.0, 3.0], [3.0, 2.0]]),
    "var_0d": (lambda x: x.var(correction=3), 2.0),
    "std_whole_dof_negative": (lambda x: x.std(correction=3), [2.0, 3.0]),
}


@pytest.mark.parametrize("name", GRADIENTS)
def test_gradient_matches_torch(name):
    fn, values = GRADIENTS[name]
    ours, theirs = _grad(staged, fn, values), _grad(torch, fn, values)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_full_max_with_nan_gradient_in_every_float_dtype(dtype):
    values = [[nan, 3.0, 1.0], [3.0, nan, nan]]
    for fn in (lambda x: x.max(), lambda x: x.min()):
        ours, theirs = _grad(staged, fn, values, dtype), _grad(torch, fn, values, dtype)
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("values", [[1.0, 3.0, nan], [nan, 1.0, nan], [3.0, 3.0, 1.0]])
def test_full_max_tangent_is_torchs_evenly_read_jvp(values, requires_grad):
    """NaN where the max is NaN (the backward's split among NaN entries is not the
    forward's), the mean of the tied entries' tangents elsewhere."""
    tangents = []
    for lib, fw in ((staged, sfw), (torch, tfw)):
        with fw.dual_level():
            primal = lib.tensor(values, requires_grad=requires_grad)
            x = fw.make_dual(primal, lib.tensor([0.5, 2.0, 4.0]))
            tangents.append(_np(fw.unpack_dual(x.max()).tangent))
    np.testing.assert_array_equal(*tangents)


def test_var_of_complex_without_dof_has_torchs_real_infinite_gradient():
    fn, values = (lambda x: x.var(correction=3)), [2.0, 3.0 + 1j]
    ours, theirs = _grad(staged, fn, values, "complex64"), _grad(torch, fn, values, "complex64")
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_cumprod_accumulates_in_float32(dtype):
    """Each product rounds once from float32 (float16 running products end at 51.56, 5%
    below torch's 54.5); the scan multiplies in another order than torch's loop, so a
    float32 product can round to the neighbouring half value: one ulp of tolerance."""
    ours = staged.tensor([1.001] * 4096, dtype=getattr(staged, dtype)).cumprod(0)
    theirs = torch.tensor([1.001] * 4096, dtype=getattr(torch, dtype)).cumprod(0)
    assert ours.dtype is getattr(staged, dtype)
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=2**-10, atol=0)


def test_half_cumprod_to_a_wider_dtype_is_that_dtype():
    ours = staged.tensor([1.001] * 64, dtype=staged.float16).cumprod(0, dtype=staged.float64)
    theirs = torch.tensor([1.001] * 64, dtype=torch.float16).cumprod(0, dtype=torch.float64)
    assert ours.dtype is staged.float64
    np.testing.assert_allclose(to_numpy(ours), to_numpy(theirs), rtol=1e-14)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 17, 64, 1000])
def test_nanmedian_of_an_all_nan_row_has_torchs_index(n):
    rows = [[nan] * n, [1.0] + [nan] * (n - 1)]
    ours = staged.tensor(rows).nanmedian(1)
    theirs = torch.tensor(rows).nanmedian(1)
    np.testing.assert_array_equal(to_numpy(ours.indices), to_numpy(theirs.indices))
    np.testing.assert_array_equal(to_numpy(ours.values), to_numpy(theirs.values))


def test_nanmedian_of_a_mixed_row_keeps_the_lower_middle_number():
    rows = [[1.0, nan, 2.0, 1.0, 3.0], [nan, 2.0, nan, nan, nan]]
    ours, theirs = staged.tensor(rows).nanmedian(1), torch.tensor(rows).nanmedian(1)
    np.testing.assert_array_equal(to_numpy(ours.indices), to_numpy(theirs.indices))


# (expression in L, exception type, a fragment of torch's message)
ERRORS = [
    ("L.tensor([]).max()", RuntimeError, "Expected reduction dim to be specified"),
    ("L.zeros(0, 3).min()", RuntimeError, "Expected reduction dim to be specified"),
    ("L.tensor([]).amax()", RuntimeError, "amax(): Expected reduction dim to be specified"),
    ("L.zeros(0, 3).max(0)", IndexError, "max(): Expected reduction dim 0 to have non-zero"),
    ("L.zeros(0, 3).amax(0)", IndexError, "amax(): Expected reduction dim 0 to have non-zero"),
    ("L.zeros(3, 0).amin((0, 1))", IndexError, "amin(): Expected reduction dim 1 to have"),
    ("L.tensor([]).argmax()", IndexError, "argmax(): Expected reduction dim to be specified"),
    ("L.zeros(3, 0).argmin(1)", IndexError, "argmin(): Expected reduction dim 1 to have"),
    ("L.tensor([True, False]) - L.tensor([1, 2])", RuntimeError, "with a bool tensor"),
    ("L.tensor([1, 2]) - L.tensor([True, False])", RuntimeError, "with a bool tensor"),
    ("L.tensor([1.5]) - True", RuntimeError, "with a bool tensor"),
    ("2.5 - L.tensor([True])", RuntimeError, "Subtraction, the `-` operator"),
    ("L.rsub(L.tensor([True]), L.tensor([2]))", RuntimeError, "with a bool tensor"),
    ("L.tensor([2]).sub(L.tensor([True]), alpha=2)", RuntimeError, "with a bool tensor"),
    ("L.tensor([True, False]) % L.tensor([True, True])", NotImplementedError, "remainder_cpu"),
    ("True % L.tensor([True])", NotImplementedError, "remainder_cpu"),
    ("L.fmod(L.tensor([True, False]), True)", NotImplementedError, "fmod_cpu"),
    ("L.tensor([True, False]).clamp(max=True)", NotImplementedError, "clamp_max_scalar_cpu"),
    ("L.tensor([True]).clamp(False, True)", NotImplementedError, "clamp_scalar_cpu"),
    ("L.tensor([True]).clamp_min(True)", NotImplementedError, "clamp_min_scalar_cpu"),
    ("L.tensor([True]).clamp(L.tensor([True]), L.tensor([True]))", NotImplementedError, "clamp"),
    (
        "L.tensor([1, 2], dtype=L.int32).lerp(L.tensor([3, 4], dtype=L.int32), 0.5)",
        NotImplementedError,
        "lerp_kernel_scalar",
    ),
    (
        "L.tensor([1., 2]).lerp(L.tensor([3., 4], dtype=L.float64), 0.5)",
        RuntimeError,
        "for `end` but got dtype",
    ),
    (
        "L.tensor([1, 2]).addcdiv(L.tensor([2, 3]), L.tensor([1, 1]))",
        RuntimeError,
        "Integer division with addcdiv is no longer supported",
    ),
    (
        "L.tensor([1, 2]).add(L.tensor([2, 3]), alpha=2.5)",
        RuntimeError,
        "argument alpha must not be a floating point number",
    ),
    ("L.tensor([1, 2]).sub(2, alpha=2.0)", RuntimeError, "alpha must not be a floating point"),
    ("L.tensor([1, 2]).add(L.tensor([2, 3]), alpha=True)", RuntimeError, "Boolean alpha only"),
    (
        "L.tensor([1., 2]).add(L.tensor([2, 3]), alpha=1j)",
        RuntimeError,
        "alpha must not be a complex number",
    ),
    (
        "L.tensor([1, 2], dtype=L.int32).norm()",
        RuntimeError,
        "Expected a floating point or complex tensor as input. Got Int",
    ),
    ("L.tensor([[1, 2, 3]]).logcumsumexp(-1)", NotImplementedError, "logcumsumexp_out_cpu"),
    ("L.tensor([1234, 1250]).round(decimals=-2)", NotImplementedError, "round_cpu"),
    ("L.tensor([True, True]).cumsum(0, dtype=L.bool)", NotImplementedError, "cumsum_out_cpu"),
    ("L.tensor([1, 2]).cumprod(0, dtype=L.bool)", NotImplementedError, "cumprod_out_cpu"),
    ("L.tensor([True, True, False]).argmax()", RuntimeError, "does not support bool input"),
    ("L.tensor([True, False]).argmin(0)", RuntimeError, "does not support bool input"),
    ("L.tensor([True, False, True]).topk(2)", RuntimeError, "topk does not support bool"),
    ("L.tensor([True, False, True]).median()", NotImplementedError, "median_cpu"),
    ("L.tensor([True, False, True]).nanmedian(0)", NotImplementedError, "median_out"),
    ("L.tensor([[True, True], [True, True]]).trace()", NotImplementedError, '"trace"'),
]


@pytest.mark.parametrize(("src", "error", "fragment"), ERRORS, ids=[e[0] for e in ERRORS])
def test_error_matches_torch(src, error, fragment):
    for lib in (torch, staged):
        with pytest.raises(error) as info:
            eval(src, {"L": lib})
        assert fragment in str(info.value), (lib.__name__, str(info.value))


# what torch still computes next to those refusals
ALLOWED = [
    "L.zeros(0, 3).max(1)",
    "L.zeros(0, 3).amax(1)",
    "L.zeros(0, 3).argmax(1)",
    "L.tensor([True, False]).max(0)",
    "L.tensor([1, 0]) % True",
    "L.tensor([True, False]) % 2",
    "L.tensor([True, False]).clamp(min=1)",
    "L.tensor([True, False]).clamp(max=L.tensor([True, True]))",
    "L.tensor([1, 2]).addcdiv(L.tensor([2., 3]), L.tensor([1, 1]))",
    "L.tensor([1, 2]).addcmul(L.tensor([2, 3]), L.tensor([1, 1]), value=2)",
    "L.tensor([1, 2]).add(L.tensor([2, 3]), alpha=3)",
    "L.tensor([1., 2]).add(L.tensor([2, 3]), alpha=2.5)",
    "L.tensor([1+1j, 2]).add(L.tensor([2, 3]), alpha=1j)",
    "L.tensor([1234, 1250]).round()",
    "L.tensor([2, 3], dtype=L.float16).var(correction=3)",
]


@pytest.mark.parametrize("src", ALLOWED)
def test_value_matches_torch(src):
    ours, theirs = eval(src, {"L": staged}), eval(src, {"L": torch})
    ours, theirs = (r if isinstance(r, tuple) else (r,) for r in (ours, theirs))
    for a, b in zip(ours, theirs, strict=True):
        assert str(a.dtype).rpartition(".")[2] == str(b.dtype).rpartition(".")[2]
        np.testing.assert_array_equal(_np(a), _np(b))


@pytest.mark.parametrize(
    "src",
    [
        "L.tensor([3.0]).std()",
        "L.tensor([3.0]).var()",
        "L.tensor([[3.0, 4.0]]).std(0)",
        "L.var_mean(L.tensor([3.0]))",
        "L.std_mean(L.tensor([3.0]))",
        "L.tensor([3.0, 4.0]).var(correction=2)",
        "L.zeros(0, 3).std(0)",
        "L.tensor([3.0], dtype=L.float16).std()",
        "L.tensor([3.0, 4.0]).std()",  # one degree of freedom: no warning
    ],
)
def test_no_degree_of_freedom_warns_as_torch(src):
    """A std of one sample is NaN: torch warns, naming the op (a batch of one in a
    hand-written normalisation)."""
    caught = []
    for lib in (staged, torch):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            eval(src, {"L": lib})
        caught.append([str(x.message).split(" (Triggered")[0] for x in w])
    assert caught[0] == caught[1]


@pytest.mark.parametrize("compiled", [False, True])
def test_prod_gradient_keeps_the_sign_of_a_lone_zero(compiled):
    """With one zero in a slice each other entry's partial is the zero times the rest:
    ``[-0., 2, 3]`` gives ``[6, -0., -0.]`` as torch's (0.0 before: the zero was summed)."""
    rows = [[-0.0, 2.0, 3.0], [1.0, 0.0, -2.0], [-4.0, -0.0, 5.0], [2.0, 3.0, 4.0]]

    def grad(lib, x):
        return lib.autograd.grad((x * 1).prod(1).sum(), x)[0]

    want = grad(torch, torch.tensor(rows, requires_grad=True)).numpy()
    run = staged.compile(lambda x: grad(staged, x)) if compiled else lambda x: grad(staged, x)
    got = to_numpy(run(staged.tensor(rows, requires_grad=True)))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
