"""The differential checks of a random program: staged eager vs torch 2.13 (values, dtypes,
reverse- and forward-mode gradients, second order), and one compiled or ONNX module
holding a batch of programs vs staged eager."""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import warnings

import numpy as np
import torch
from hypothesis import reject

import staged
import staged.autograd.forward_ad as fwAD
from tests.fuzz.program import Program

# Tolerances per float dtype. A program chains up to a few ops on values in [-3, 3]; each
# op may round differently from torch's kernel (another libm, summation order) by an ulp
# or two, and the chain amplifies that by its conditioning (exp of exp, a difference of
# near-equal values). float64 leaves ~1e-13 of slack below these; float32 a factor ~100.
TOL = {"float32": (1e-4, 1e-5), "float64": (1e-7, 1e-10)}
COMPILED_TOL = {"float32": (1e-4, 1e-5), "float64": (1e-7, 1e-10)}


@contextlib.contextmanager
def quiet():
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def numpy(t):
    if isinstance(t, torch.Tensor):
        # force: torch.autograd.grad may return a ZeroTensor (abs's second derivative),
        # which numpy() refuses without it
        return t.detach().numpy(force=True)
    return np.asarray(t.detach() if isinstance(t, staged.Tensor) else t)


def tol(prog: Program, tols=TOL, pool=()):
    kinds = {str(a.dtype) for a in prog.inputs} & set(tols)
    # integers and bools compute in float32 (cos(True)): inputs, or values made on the way
    # (le(x, x)) of the program's run (``pool``, torch's values)
    if any(a.dtype.kind in "biu" for a in prog.inputs) or any(
        not (v.is_floating_point() or v.is_complex()) for v in pool
    ):
        kinds.add("float32")
    return max((tols[k] for k in kinds), default=tols["float64"])


def assert_same(got, want, rtol, atol, what):
    g, w = numpy(got), numpy(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape}, expected {w.shape}"
    assert g.dtype == w.dtype, f"{what}: dtype {g.dtype}, expected {w.dtype}"
    if g.dtype.kind in "fc":
        # at least the value's own dtype's tolerance: an integer input of a float64 program
        # becomes a float32 value (digamma(2) is an ulp apart from torch's float32 kernel);
        # a complex one's parts' (polar's cos and sin: torch's vectorized ones, an ulp off)
        rtol, atol = max((rtol, atol), TOL.get(np.finfo(g.dtype).dtype.name, (0, 0)))
        wide = np.complex128 if g.dtype.kind == "c" else np.float64
        np.testing.assert_allclose(
            g.astype(wide), w.astype(wide), rtol=rtol, atol=atol, err_msg=what
        )
    else:
        np.testing.assert_array_equal(g, w, err_msg=what)


def _floating(t):
    return numpy(t).dtype.kind == "f"


def cotangents(values, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(numpy(v).shape).astype(numpy(v).dtype) for v in values]


def run_both(prog: Program):
    """(staged leaves, staged pool, torch leaves, torch pool) of one eager run each."""
    sl, tl = prog.leaves(staged), prog.leaves(torch)
    with quiet():
        sp = prog.run(staged, sl)
        tp = prog.run(torch, tl)
    return sl, sp, tl, tp


def check_eager(prog: Program, second_order=False):
    """Values, dtypes and requires_grad of every value, then the VJP of every
    differentiable value under random cotangents (and, with ``second_order``, the
    gradient of <w, VJP>), against torch."""
    sl, sp, tl, tp = run_both(prog)
    rtol, atol = tol(prog, pool=tp)
    if _no_oracle(prog, tp, "value"):
        reject()
    assert len(sp) == len(tp)
    for k, (s, t) in enumerate(zip(sp, tp)):
        assert_same(s, t, rtol, atol, f"value {k}")
    # torch marks the result of an op it has no derivative for (floor_divide) as requiring
    # grad, with a NotImplemented node that raises on backward; staged's (piecewise
    # constant) carries none: no oracle for requires_grad or gradients
    if any(type(t.grad_fn).__name__ == "NotImplemented" for t in tp):
        reject()
    # torch's own bug: a write of a float that requires grad into a whole integer tensor
    # (i = ints.clone(); i[()] = x) makes it require grad, which torch forbids otherwise
    if any(t.requires_grad and not (t.is_floating_point() or t.is_complex()) for t in tp):
        reject()
    for k, (s, t) in enumerate(zip(sp, tp)):
        assert s.requires_grad == t.requires_grad, f"value {k}: requires_grad"
    if _no_oracle(prog, tp, "reverse"):
        reject()
    outs = [k for k, t in enumerate(tp) if t.requires_grad]
    wrt = [k for k, t in enumerate(tl) if t.requires_grad]
    if not outs:
        return
    cots = cotangents([tp[k] for k in outs])
    with quiet():
        try:
            tg = torch.autograd.grad(
                [tp[k] for k in outs],
                [tl[k] for k in wrt],
                [torch.tensor(c) for c in cots],
                allow_unused=True,
                materialize_grads=True,
                create_graph=second_order,
            )
        except RuntimeError:  # torch's own backward fails (pow(x, bool)): no oracle
            reject()
        sg = staged.autograd.grad(
            [sp[k] for k in outs],
            [sl[k] for k in wrt],
            [staged.tensor(c) for c in cots],
            allow_unused=True,
            materialize_grads=True,
            create_graph=second_order,
        )
    for k, (s, t) in enumerate(zip(sg, tg)):
        assert_same(s, t, rtol, atol, f"gradient of input {wrt[k]}")
    if second_order and not _no_oracle(prog, tp, "second order"):
        _check_second_order(sg, tg, sl, tl, wrt, rtol, atol)


def _ldexp_point(x, *e) -> bool:
    """A non-finite input or exponent, or a negative exponent (of a complex one: its real
    part, which torch's ``<`` does not take)."""
    if (~x.isfinite()).any():
        return True
    if not e:
        return False
    real = e[0].real if e[0].is_complex() else e[0]
    return bool(((real < 0) | ~e[0].isfinite()).any())


def _beyond_float32_exponents(x) -> bool:
    a = x.double().abs()
    return bool(((a != 0) & ((a < 2.0**-125) | (a >= 2.0**127))).any())


# Points where torch's derivative is NaN by an artefact of its formula and staged's is the
# limit (no oracle there): {mode: {op: (why, whether the op's inputs are such a point)}}
def _degenerate(x) -> bool:
    """A variance's input with no degrees of freedom or float32 deviations below 1e-18."""
    if x.numel() <= 1 or 1 in x.shape:
        return True
    d = x.double()
    return x.dtype != torch.float64 and bool(((d - d.mean()).abs() < 1e-18).all())


def _expanded(x) -> bool:
    return any(st == 0 and n > 1 for st, n in zip(x.stride(), x.shape))


_NO_ORACLE = {
    "value": {
        # at a pole (the negative integers, -inf) torch's polygamma(1) is finite (1.3e15
        # at -1) and its polygamma(n >= 2) of -inf -inf; staged's inf, and NaN at -inf;
        # at +inf torch's polygamma(n >= 2) is NaN, staged's the limit (-)0
        "polygamma": lambda x: (
            (x == math.inf) | ((x.double() <= 0) & (x.double() == x.double().round()))
        ).any(),
        # torch's float32 erfcx is a float32 polynomial 1-2 ulps off (1.0 at 1.2e-7, where
        # the value is 0.99999988); staged's is its float64 rounded: near 0 ops downstream
        # (erfinv, frexp at 1) turn that ulp into any difference
        "erfcx": lambda x: bool(x.dtype == torch.float32 and (x.abs() < 1e-3).any()),
        # var_mean/std_mean of a slice with an infinity: torch's Welford mean is NaN (inf -
        # inf in its running update), staged's the mean (inf), as torch's own mean()
        **dict.fromkeys(("var_mean", "std_mean"), lambda x, *_: x.isinf().any()),
        # torch's mode sorts a slice with std::sort and ``<``, for which NaN is unordered:
        # its answer (value and index) depends on where the NaN sits; staged sorts NaNs
        # last, each its own value (README)
        "mode": lambda x, *_: x.isnan().any(),
        # the sign of a NaN made upstream (log2(-1): NumPy's x86 default NaN is negative,
        # torch's vectorized log2 positive) is unspecified, so is copysign's result by it
        "copysign": lambda x, *y: bool(y and y[0].isnan().any()),
        # torch 2.13's median and nanmedian over a dim of an expanded tensor (a stride 0 of
        # a size above 1) read memory outside it: median(tensor(1.).expand(2), 0) is
        # (4.6e-41, index 1), its gradient elsewhere; staged's is (1., index 0)
        **dict.fromkeys(("median", "nanmedian"), lambda x, *_: _expanded(x)),
    },
    "reverse": {
        # as in second order below: torch's float32 first derivative of sinc near 0 cancels
        # (-0.000701 at x = 1.6e-4, where it is -0.000535, staged's); and at NaN torch's
        # gradient of hardtanh/relu6/hardswish depends on the vector lane (from 4 float64 or 8
        # float32 entries: 0 or NaN; in the scalar tail g, staged's)
        "sinc": lambda x: bool(x.dtype != torch.float64 and (x.double().abs() < 0.05).any()),
        **dict.fromkeys(("hardtanh", "relu6", "hardswish"), lambda x, *_: x.isnan().any()),
        # torch documents polar as undefined for a negative or NaN abs or an infinite
        # angle; its gradient for abs is Re(conj(g) sgn(result)): 0 at abs = 0, of the
        # wrong sign below and NaN at a NaN, where the derivative of abs e^(i angle) is
        # e^(i angle) (staged's: 0.3 for g = 0.3 + 0.7i at abs = angle = 0, torch's 0)
        # (an infinite abs too: torch's sgn of inf + NaN i, the value there, is NaN; and a
        # subnormal one, whose sgn torch's flushed division makes 0 / 0)
        "polar": lambda a, *t: bool(
            (~((a.abs() >= torch.finfo(a.dtype).tiny) & (a > 0) & a.isfinite())).any()
            or (t and t[0].isinf().any())
        ),
        # torch's derivative of frexp's mantissa is g / exponent.exp2(), the exponent an int32
        # whose exp2 is float32: 0 or subnormal where it is below -125 (a float64 below
        # 2**-125: inf or a few digits), inf above 127; staged's 2**-e is exact
        "frexp": _beyond_float32_exponents,
        # in a slice holding a NaN staged's mode may take another index of the most
        # frequent value than torch's (README), so the gradient goes elsewhere
        "mode": lambda x, *_: x.isnan().any(),
        # torch's gradient is g * exp(x - out), NaN wherever x is not finite; staged's
        # passes g through where the scan has one element (the identity)
        "logcumsumexp": lambda x: (~x.isfinite()).any(),
        # x / y for |y| < 1e-6: the gradient is a difference of terms of size 1 / y,
        # whose rounding differs with the order of the formula (x / x at 2e-16)
        "div": lambda x, y: (y.double().abs() < 1e-6).any(),
        # at +inf torch's derivative (polygamma(n + 1, inf)) is NaN, staged's the limit 0
        "polygamma": lambda x: (x == math.inf).any(),
        **dict.fromkeys(("median", "nanmedian"), lambda x, *_: _expanded(x)),
        # at a pole (0, -1, -2, ...) torch's derivative is trigamma's finite value there
        # (1.29e15 at -1 in float32, 6.6e32 in float64; inf at 0), staged's inf; near one
        # its float32 trigamma loses digits (as in forward mode, below)
        "digamma": lambda x: (
            (x.double() <= 0) & ((x.double() - x.double().round()).abs() < 1e-2)
        ).any(),
        # within float64's spacing of a pole of one of its lgamma terms (x - j / 2 for
        # x = 1.4e-16, p = 3): torch's derivative drops a term of size 1 / d (-1.26e16
        # where the sum is -1.61e16, staged's); its second derivative below
        "mvlgamma": lambda x: _near_mvlgamma_pole(x),
        # an infinite x: the divisor's derivative is -floor(x / y), which torch's floor
        # division makes NaN (inf - NaN), staged's -inf
        "remainder": lambda x, y: x.isinf().any(),
        "fmod": lambda x, y: x.isinf().any(),
        # torch's float64 gradient is 1/6 rounded to float32 (4e-8 off); staged's is 1/6
        "hardsigmoid": lambda x: x.dtype == torch.float64,
        # an infinite gradient at 0 (sqrt(silu(0))): torch's formula g s (1 + x (1 - s))
        # gives inf, staged's composite x * sigmoid(x) inf * 0 = NaN in its sigmoid term
        "silu": lambda x: (x == 0).any(),
        # at NaN torch's gradient depends on the vector lane: its vectorized kernel's is NaN
        # (as staged's), its scalar tail's (the last size % 8 or 16 elements) the positive
        # side's (tests/nn/test_activation_kinks.py)
        **dict.fromkeys(("elu", "celu", "selu", "softshrink"), lambda x: x.isnan().any()),
        # zeta(x, q) at a pole of q (0, -1, ...): torch's gradient is finite, staged's the
        # 0 * inf of -x zeta(x + 1, q)
        "zeta": lambda x, q=None: bool(
            q is not None and ((q <= 0) & (q.double() == q.double().round())).any()
        ),
        # at -0.0 torch's gradient is an infinity whose sign depends on its path (+inf for
        # g = 1 plainly, -inf with create_graph and for its tangent); staged's follows +0
        "logit": lambda x: ((x == 0) & x.signbit()).any(),
        # a NaN or an infinity beside a zero anywhere in the input: torch then takes its
        # zero-aware formula (exclusive products) for every slice, giving the product of
        # the other factors at an infinity (0 beside a zero of its slice, g over a dim of
        # size 1) and ignoring a NaN's factor; staged's gradient there is NaN (out / x =
        # inf / inf, 0 * NaN), as torch's own is when the input holds no zero
        **dict.fromkeys(
            ("cumprod", "prod"),
            lambda x, *_: bool((~x.isfinite()).any() and (x == 0).any()),
        ),
        # an all-NaN slice: the mean is NaN, and torch's gradient too (its nansum's g * mask
        # is inf * 0 for the g / 0 of an empty count); staged's nansum selects, giving 0
        "nanmean": lambda x, *_: (
            bool(x.isnan().all()) or any(x.isnan().all(d).any() for d in range(x.dim()))
        ),
        # torch's gradient is g * isfinite(x): NaN where g is NaN or inf at a non-finite x;
        # staged's composite (where) gives 0 there
        "nan_to_num": lambda x: (~x.isfinite()).any(),
        # torch's copysign gradient is g * result / input: NaN at a NaN or infinite input;
        # staged's |input| with the sign (a select) gives a finite one there
        "copysign": lambda x, *_: (~x.isfinite()).any(),
        # torch's nextafter passes the gradient to input wherever input != other, also
        # at a NaN or an infinity and toward a NaN (whose result, NaN or the largest
        # float, is no neighbour); staged's is 0 there
        "nextafter": lambda x, *y: bool((~x.isfinite()).any() or (y and y[0].isnan().any())),
        # ldexp: for a negative exponent torch's gradient is g * 2 ** e computed in
        # integers, 0 (its value, x * 2.0 ** e, is right), staged's 2.0 ** e; at an
        # infinite input or exponent one formula or the other has inf * 0
        "ldexp": lambda x, *e: _ldexp_point(x, *e),
    },
    "second order": {
        # torch's cumprod double backward divides by the input: at a tiny one it loses
        # digits (-0.3499908 for -0.35 at 1.5e-11); staged's is exact there
        "cumprod": lambda x, *_: ((x != 0) & (x.abs() < 1e-6)).any(),
        # a non-finite factor: torch's second derivative is NaN (it divides out / x),
        # staged's over dims of size 1 the exact 0
        "prod": lambda x, *_: (~x.isfinite()).any(),
        # at an infinite input torch's second derivative is NaN (inf - inf), staged's 0
        **dict.fromkeys(
            ("logaddexp", "logaddexp2"),
            lambda x, y: bool((~x.isfinite()).any() or (~y.isfinite()).any()),
        ),
        # torch's double backward of g * result / input (masked at 0) is 0 / 0 = NaN at
        # input 0, and near 0 the difference of two terms g / x, which cancel to rounding
        # noise of their size (0.0 for 0.1 at x = 2.2e-16); staged's select has none (0)
        "copysign": lambda x, *_: (x.double().abs() < 1e-6).any(),
        # torch: gradient 0, second derivative NaN (0 * inf); staged 0
        # (test_atan2_gradient_at_the_origin_is_zero); and where the result is empty,
        # torch's second derivative is NaN at a NaN input, staged's 0. Where x**2 + y**2 is
        # below float32's normal range torch's -y / (x**2 + y**2) is 0 / 0 = NaN
        # (atan2(0, 6.3e-23)), staged's the derivative, 0
        "atan2": lambda y, x: bool(
            ((y == 0) & (x == 0)).any()
            or torch.broadcast_shapes(y.shape, x.shape).numel() == 0
            or (x.dtype != torch.float64 and ((x.double() ** 2 + y.double() ** 2) < 1e-37).any())
        ),
        # at the poles: torch NaN, staged the signed infinity 2 / x**3 tends to; outside
        # [0, 1] (where the first derivative is NaN) torch's is -0, staged's NaN
        "logit": lambda x: ((x <= 0) | (x >= 1)).any(),
        # clamped (logit(x, eps=0.2) outside [0.2, 0.8]): torch NaN, staged 0
        "logit_eps": lambda x: ((x < 0.2) | (x > 0.8)).any(),
        # 0 ** y: torch's second derivative is NaN (log 0 * 0), staged's 0
        "pow": lambda x, y: (x == 0).any(),
        "float_power": lambda x, y: (x == 0).any(),
        # x / y with |y| < 1e-2: its second derivative is a difference of terms of size
        # 1 / y**3, whose rounding differs with the order of the formula (1.4e-9 against
        # torch's 9.3e-10 for x / x at 2.1e-4)
        "div": lambda x, y: (y.double().abs() < 1e-2).any(),
        # a zero or NaN divisor: the first derivative is NaN (floor(x / 0)); torch's
        # second is 0 (its floor division has no derivative), staged's NaN
        "remainder": lambda x, y: ((y == 0) | y.isnan()).any(),
        "fmod": lambda x, y: ((y == 0) | y.isnan()).any(),
        # a scan of one element is the identity: staged's gradient g does not depend on x,
        # so a second derivative raises (as torch's does for any linear function); torch's
        # g * exp(x - out) does, and gives 0
        "logcumsumexp": lambda x: x.dim() == 0 or 1 in x.shape,
        # near 0: torch's second derivative is NaN at 0 (its formula's masked 0 / 0) and
        # cancels around it, by eps / (pi x)**2 relative (0 at 6.6e-18), staged's is
        # its Taylor form's, -pi**2 / 3 at 0 (test_sinc_derivatives_at_zero); in float32
        # its first derivative cancels the same way (-0.0064113 at 2**-9, where it is
        # -0.0064255, staged's)
        "sinc": lambda x: (x.double().abs() < (1e-3 if x.dtype == torch.float64 else 0.05)).any(),
        # at NaN torch's gradient depends on the vector lane (as elu's tangent, forward
        # below): its vector kernel's comparisons drop g, its scalar tail's keep it
        **dict.fromkeys(("hardtanh", "relu6", "hardswish"), lambda x, *_: x.isnan().any()),
        # a variance of one element per slice (no degrees of freedom): the value and the
        # gradient are NaN in both, staged's a constant (its second derivative 0), torch's
        # a graph (NaN); and deviations whose squares underflow float32 (1e-38): torch
        # accumulates in double, staged in float32, a variance of 0 (its gradient 0)
        **dict.fromkeys(("var", "std", "var_mean", "std_mean"), lambda x, *_: _degenerate(x)),
        # a NaN entry: torch's gradient is g * mask, NaN where g is infinite (the log of a
        # sum of 0); staged's nansum selects, giving 0 (nanmean above)
        "nansum": lambda x, *_: x.isnan().any(),
        # at +inf torch's second derivative (polygamma(1, inf)'s) is NaN, staged's the
        # limit -0; at the poles as lgamma's (below)
        "digamma": lambda x: (
            (x == math.inf) | ((x.double() <= 0) & (x.double() == x.double().round()))
        ).any(),
        # a zero vector: x / max(|x|, eps) is x / eps there, whose second derivative is 0
        # (staged's); torch's is NaN, the norm's 0 / 0 second derivative times the clamp's 0
        "normalize": lambda x, *_: (x == 0).any(),
        # at the poles (0, -1, -2, ...) torch's second derivative is polygamma(1)'s finite
        # value there (1.5e32 at -1), staged's inf
        "lgamma": lambda x: ((x.double() <= 0) & (x.double() == x.double().round())).any(),
        # near a pole of a term, as in reverse mode: torch's drops a 1 / d**2 term (8.1e31
        # where the sum is 1.31e32, staged's)
        "mvlgamma": lambda x: _near_mvlgamma_pole(x),
        # near 0 torch's i1' is i0(x) - i1(x) / x, whose derivative cancels terms of size
        # 1 / 2x: eps / x off (-9.5e-7 at x = 9e-11, where i1'' is 3.5e-11; staged's 0)
        "i1": lambda x: (x.double().abs() < 1e-4).any(),
        "i1e": lambda x: (x.double().abs() < 1e-4).any(),
        # the kink at 0: staged's second derivative is the left one (alpha), torch's 0
        "elu": lambda x: (x == 0).any(),
        "celu": lambda x: (x == 0).any(),
        "selu": lambda x: (x == 0).any(),
    },
    # compiled and ONNX against eager: no MLIR or ONNX op reads a NaN's sign (README)
    "compiled": {
        "signbit": lambda x: x.isnan().any(),
        "copysign": lambda x, *y: bool(y and y[0].isnan().any()),
    },
    "forward": {
        # as in reverse mode: sinc's float32 derivative near 0, hardtanh/relu6/hardswish at NaN
        "sinc": lambda x: bool(x.dtype != torch.float64 and (x.double().abs() < 0.05).any()),
        **dict.fromkeys(("hardtanh", "relu6", "hardswish"), lambda x, *_: x.isnan().any()),
        "frexp": _beyond_float32_exponents,  # as in reverse mode
        # ldexp and nextafter: as in reverse mode above; sgn: torch's tangent at a NaN is
        # NaN, staged's 0 (the derivative of a step)
        "ldexp": _ldexp_point,
        "nextafter": lambda x, *y: bool((~x.isfinite()).any() or (y and y[0].isnan().any())),
        "sgn": lambda x: x.isnan().any(),
        # elu and its kin at NaN: torch's tangent depends on the vector lane, as its
        # gradient does (reverse mode above; softshrink at NaN: 0 in the vector lanes, as
        # staged's, t in the scalar tail)
        **dict.fromkeys(("elu", "celu", "selu", "softshrink"), lambda x: x.isnan().any()),
        # sqrt at 0: an infinite tangent, whose sums downstream (var_mean) are inf - inf in
        # one order and -inf in another
        "sqrt": lambda x: (x == 0).any(),
        # copysign: torch's tangent, t * result / input, is NaN at a NaN or infinite input.
        # mode: in a slice holding a NaN staged may take another index of the most frequent
        # value than torch (a known difference, README), so another element's tangent
        "copysign": lambda x, *_: (~x.isfinite()).any(),
        "mode": lambda x, *_: x.isnan().any(),
        # logit with eps: torch's tangent at a NaN is 0 (its clamp's mask), staged's NaN
        "logit_eps": lambda x: x.isnan().any(),
        # near a pole torch's float32 trigamma loses digits (1434231.75 at -2.0008349,
        # where it is 1434459.87, staged's 1434459.875), and at one it is finite (-5.3e14
        # at -1), where staged's is inf
        "digamma": lambda x: (
            (x.double() <= 0) & ((x.double() - x.double().round()).abs() < 1e-2)
        ).any(),
        # torch's tangent is t * isfinite(x) (NaN for a NaN t at a non-finite x), staged's 0
        "nan_to_num": lambda x: (~x.isfinite()).any(),
        # an infinite x: as in reverse mode, torch's floor(x / y) is NaN, staged's inf
        "remainder": lambda x, y: x.isinf().any(),
        "fmod": lambda x, y: x.isinf().any(),
        # at -0.0 torch's tangent is t / (x (1 - x)) = t / -0, the sign its reverse-mode
        # gradient (+inf) does not have; staged's is that gradient times t
        "logit": lambda x: (x == 0).any(),
        # two equal infinities: torch's tangent is NaN (exp(inf - inf)), staged's the
        # limit, half of each input's, as its (torch's) gradient away from infinity
        "logaddexp": lambda x, y: (x.isinf() & (x == y)).any(),
        "logaddexp2": lambda x, y: (x.isinf() & (x == y)).any(),
        # ties: torch's gradient goes to x, its tangent (a formula with > for >=) is y's;
        # staged's are both x's
        # (and NaNs, where torch's tangent is NaN and staged's the other side's)
        "fmax": lambda x, y: ((x == y) | x.isnan() | y.isnan()).any(),
        "fmin": lambda x, y: ((x == y) | x.isnan() | y.isnan()).any(),
        # a zero and an infinity: the products from there on are NaN (0 * inf), and so is
        # staged's tangent; torch's may be inf. A NaN factor: torch.func's tangent is NaN
        # (it divides by the factors), staged's t times the other factors (t for one)
        "cumprod": lambda x: bool(((x == 0).any() and x.isinf().any()) or x.isnan().any()),
        # a product with a NaN or infinite factor: staged's tangent is NaN (out / x, as
        # torch's forward_ad and reverse mode), torch.func's the sum of t times the other
        # factors' product (t for one element, inf for [inf, 2])
        "prod": lambda x: (~x.isfinite()).any(),
    },
}


def _near_mvlgamma_pole(x):
    """Within 1e-12 of a pole of a term lgamma(x - j / 2), j < p <= 5: 2x an integer <= 4."""
    y = 2 * x.double()
    return (((y - y.round()).abs() < 1e-12) & (y <= 4)).any()


_FAMILIES = ("polygamma", "mvlgamma", "copysign", "median", "nanmedian")


def _no_oracle(prog, tp, mode):
    """Whether an op of the program sees a point of ``_NO_ORACLE[mode]``."""
    # an op, its in-place form (div_), or a variant (polygamma_2, nan_to_num_defaults,
    # i1_at_zero, lgamma_negative, copysign_signed_zeros, median_indices)
    for step in prog.steps:
        name = step.what.rstrip("_")
        for variant in ("_defaults", "_at_zero", "_negative"):
            name = name.removesuffix(variant)
        name = next((f for f in _FAMILIES if name.startswith(f)), name)
        at = _NO_ORACLE[mode].get(name) if step.kind in ("op", "inplace") else None
        if at is not None and at(*(tp[r].detach() for r in step.refs[:2])):
            return True
    return False


def _check_second_order(sg, tg, sl, tl, wrt, rtol, atol):
    ws = cotangents(tg, seed=1)
    # an empty gradient says nothing (torch's of an empty cummax requires grad, staged's not)
    pairs = [(s, t, w) for s, t, w in zip(sg, tg, ws) if t.requires_grad and t.numel()]
    if not pairs:
        return
    with quiet():
        ttot = sum((t * torch.tensor(w)).sum() for _, t, w in pairs)
        stot = sum((s * staged.tensor(w)).sum() for s, _, w in pairs)
        try:
            tg2 = torch.autograd.grad(
                ttot, [tl[k] for k in wrt], allow_unused=True, materialize_grads=True
            )
        except NotImplementedError:  # torch's div double backward: abs of a bool
            reject()
        if stot.requires_grad:
            sg2 = staged.autograd.grad(
                stot, [sl[k] for k in wrt], allow_unused=True, materialize_grads=True
            )
        else:  # staged's gradients are constant where torch's graph has zero derivatives
            sg2 = [staged.zeros_like(sl[k]) for k in wrt]  # (softshrink's mask)
    for k, (s, t) in enumerate(zip(sg2, tg2)):
        assert_same(s, t, rtol, atol, f"second-order gradient of input {wrt[k]}")


def check_forward_mode(prog: Program):
    """Tangents of every float value by ``staged.autograd.forward_ad`` vs
    ``torch.func.jvp`` along random tangents of the float inputs."""
    wrt = [k for k, a in enumerate(prog.inputs) if a.dtype.kind == "f"]
    tans = cotangents([prog.inputs[k] for k in wrt], seed=2)
    const = prog.leaves(torch, requires_grad=False)

    def tf(*xs):
        leaves = list(const)
        for k, x in zip(wrt, xs):
            leaves[k] = x
        return tuple(v for v in prog.run(torch, leaves) if v.dtype.is_floating_point)

    with quiet():
        pool = prog.run(torch, list(const))
        rtol, atol = tol(prog, pool=pool)
        if _no_oracle(prog, pool, "value") or _no_oracle(prog, pool, "forward"):
            reject()
        try:
            touts, ttans = torch.func.jvp(
                tf, tuple(const[k] for k in wrt), tuple(torch.tensor(t) for t in tans)
            )
        except NotImplementedError:  # torch has no forward AD for aten::floor_divide
            reject()
        except IndexError as err:  # its logcumsumexp JVP takes the max of an empty dim
            if "non-zero size" not in str(err):
                raise
            reject()
        except RuntimeError as err:
            # a write of a dual into an integer tensor (i[0] = x) trips torch's INTERNAL
            # ASSERT "Expected both tensor and its forward grad to be floating point"; pow's
            # JVP subtracts 1 from a bool exponent, atan2's negates a bool y
            if not any(
                m in str(err) for m in ("forward grad", "with a bool tensor", "on a bool tensor")
            ):
                raise
            reject()
        with fwAD.dual_level():
            leaves = prog.leaves(staged, requires_grad=False)
            for k, t in zip(wrt, tans):
                leaves[k] = fwAD.make_dual(leaves[k], staged.tensor(t))
            duals = [fwAD.unpack_dual(v) for v in prog.run(staged, leaves) if _floating(v)]
            souts = [numpy(d.primal) for d in duals]
            stans = [
                np.zeros_like(p) if d.tangent is None else numpy(d.tangent)
                for d, p in zip(duals, souts)
            ]
    assert len(souts) == len(touts)
    for k, (s, t, st, tt) in enumerate(zip(souts, touts, stans, ttans)):
        assert_same(s, t, rtol, atol, f"float value {k}")
        # torch's own slip: an in-place op of a float64 dual into a float32 tensor leaves
        # a float64 tangent on it (v.add_(x64)); staged's has the value's dtype
        tt = tt.to(t.dtype) if tt.dtype != t.dtype and tt.is_floating_point() else tt
        assert_same(st, tt, rtol, atol, f"tangent of float value {k}")


# --- one module for a batch of programs ------------------------------------------------------
def batch_body(progs):
    """``body(*leaves_and_cotangents)``: every program run on its leaves, then the VJP of its
    differentiable values under the given cotangents; returns all values and gradients
    (the same function staged runs eagerly, captures, compiles and exports)."""
    shapes = []  # per program: (number of leaves, number of cotangents)
    owners = []  # per output of body: the program it comes from

    def body(*flat):
        out, k = [], 0
        owners.clear()
        for prog, (nl, nc) in zip(progs, shapes):
            leaves, cots = flat[k : k + nl], flat[k + nl : k + nl + nc]
            k += nl + nc
            pool = prog.run(staged, list(leaves))
            diff = [v for v in pool if v.requires_grad]
            wrt = [x for x in leaves if x.requires_grad]
            grads = (
                staged.autograd.grad(
                    diff, wrt, list(cots), allow_unused=True, materialize_grads=True
                )
                if diff
                else []
            )
            out += [v for v in pool[nl:]] + list(grads)
            owners.extend([prog] * (len(out) - len(owners)))
        return out

    flat = []
    kept = []
    for prog in progs:
        leaves = prog.leaves(staged)
        with quiet():
            pool = prog.run(staged, prog.leaves(staged))
            if _no_oracle(prog, pool, "compiled"):
                continue
            try:  # a program whose backward raises eagerly is the eager check's business
                diff = [v for v in pool if v.requires_grad]
                if diff:
                    staged.autograd.grad(
                        diff,
                        [x for x in pool[: len(leaves)] if x.requires_grad],
                        [staged.ones_like(v) for v in diff],
                        allow_unused=True,
                    )
            except RuntimeError:
                continue
        kept.append(prog)
        cots = [staged.tensor(c) for c in cotangents([v for v in pool if v.requires_grad])]
        shapes.append((len(leaves), len(cots)))
        flat += leaves + cots
    progs[:] = kept
    return body, flat, owners


def check_compiled(progs, backend):
    """One captured module of the whole batch, compiled for ``backend``, vs eager."""
    body, flat, owners = batch_body(progs)
    with quiet():
        want = body(*flat)
        got = staged.capture(body, *flat).compile(backend)(*flat)
    _compare_batch(owners, got, want, backend)


def check_onnx(progs):
    """The captured batch exported to ONNX, run by onnxruntime, vs eager."""
    import onnxruntime as ort

    body, flat, owners = batch_body(progs)
    with quiet():
        want = body(*flat)
        cap = staged.capture(body, *flat)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "batch.onnx")
        cap.export_onnx(path)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feed = {i.name: numpy(x) for i, x in zip(sess.get_inputs(), flat)}
        got = sess.run(None, feed)
        names = [o.name for o in sess.get_outputs()]
    if names[-1] == "check.check":  # the index checks' report (eager raised none): all 0
        assert not got.pop().any(), "onnx: an index check failed where eager's passed"
    _compare_batch(owners, got, want, "onnx")


def _compare_batch(owners, got, want, what):
    """Output by output; a mismatch names the program it comes from, as source."""
    assert len(got) == len(want)
    for k, (g, w, prog) in enumerate(zip(got, want, owners)):
        # a float32 result of float64/int inputs (tan of an int64) is float32 arithmetic
        rtol, atol = max(tol(prog, COMPILED_TOL), COMPILED_TOL.get(numpy(w).dtype.name, (0, 0)))
        g = numpy(g)
        w = numpy(w)
        if (
            what == "vulkan-spirv"
            and g.dtype.kind in "fc"
            and (g.shape, g.dtype) == (w.shape, w.dtype)
        ):
            # README's vulkan-spirv row: Vulkan's float rules need not keep NaN and inf
            # (0 / 0 in a variance over one element came out finite on lavapipe)
            g = np.where(np.isfinite(w), g, w)
        try:
            assert_same(g, w, rtol, atol, f"{what}: output {k}")
        except AssertionError as err:
            raise AssertionError(f"{err}\nof the program:\n{prog.source()}") from None
