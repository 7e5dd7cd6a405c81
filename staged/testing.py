"""``staged.testing.assert_close``: torch.testing's comparison, its default tolerances and
its messages, over tensors, Python numbers and nested sequences and mappings of them; and
the deprecated ``assert_allclose`` over it."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

from typing import Any

import numpy as np

from . import dtypes as dt
from .eager.factories import tensor
from .eager.tensor import Tensor

# (rtol, atol) by dtype, torch's defaults; exact for integers and bools
_TOLERANCES = {
    dt.float16: (1e-3, 1e-5),
    dt.bfloat16: (1.6e-2, 1e-5),
    dt.float32: (1.3e-6, 1e-5),
    dt.complex64: (1.3e-6, 1e-5),
    dt.float64: (1e-7, 1e-7),
    dt.complex128: (1e-7, 1e-7),
}
_NUMBERS = (bool, int, float, complex)


def assert_close(
    actual,
    expected,
    *,
    allow_subclasses=True,
    rtol=None,
    atol=None,
    equal_nan=False,
    check_device=True,
    check_dtype=True,
    check_layout=True,
    check_stride=False,
    msg=None,
):
    """Raise AssertionError unless ``actual`` and ``expected`` are close: same structure,
    shapes and (``check_dtype``) dtypes, and ``|actual - expected| <= atol + rtol *
    |expected|`` elementwise, with torch's defaults per dtype (``rtol``/``atol`` go
    together). ``msg``: a string, or a function of the generated message."""
    if (rtol is None) != (atol is None):
        given, missing = ("rtol", "atol") if atol is None else ("atol", "rtol")
        raise ValueError(
            f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}."
        )
    opts = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_dtype=check_dtype)
    try:
        _compare(actual, expected, opts)
    except AssertionError as err:
        text, path = err.args[0], err.args[1] if len(err.args) > 1 else ""
        if msg is not None:
            text = msg(text) if callable(msg) else msg
        elif path:
            text += f"\n\nThe failure occurred for item {path}"
        raise AssertionError(text) from None


# assert_allclose's own (rtol, atol) defaults, torch's; other dtypes exact
_ALLCLOSE_TOLERANCES = {
    dt.float16: (1e-3, 1e-3),
    dt.float32: (1e-4, 1e-5),
    dt.float64: (1e-5, 1e-8),
}


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """Deprecated (as in torch since 1.12): ``assert_close`` with numbers made tensors
    (``expected`` of ``actual``'s dtype), dtypes unchecked, NaNs equal and looser default
    tolerances."""
    warnings.warn(
        "`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a "
        "future release. Please use `torch.testing.assert_close()` instead. You can find "
        "detailed upgrade instructions in https://github.com/pytorch/pytorch/issues/61844.",
        FutureWarning,
        stacklevel=2,
    )
    if not isinstance(actual, Tensor):
        actual = tensor(actual)
    if not isinstance(expected, Tensor):
        expected = tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        pairs = [_ALLCLOSE_TOLERANCES.get(t.dtype, (0.0, 0.0)) for t in (actual, expected)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    assert_close(
        actual,
        expected,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        check_dtype=False,
        msg=msg or None,
    )


def _compare(actual, expected, opts, path: str = "") -> None:
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        return _tensors(actual, expected, opts, path)
    if isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray):
        return _tensors(Tensor._wrap(actual), Tensor._wrap(expected), opts, path)
    if isinstance(actual, _NUMBERS) and isinstance(expected, _NUMBERS):
        return _tensors(_scalar(actual), _scalar(expected), opts, path)
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if actual.keys() != expected.keys():
            missing = sorted(set(expected) - set(actual), key=repr)
            extra = sorted(set(actual) - set(expected), key=repr)
            raise AssertionError(
                "The keys of the mappings do not match:\n"
                + (f"Missing keys in the actual mapping: {missing}\n" if missing else "")
                + (f"Extra keys in the actual mapping: {extra}" if extra else ""),
                path,
            )
        for k in expected:
            _compare(actual[k], expected[k], opts, f"{path}[{k!r}]")
        return
    if (
        isinstance(actual, Sequence)
        and isinstance(expected, Sequence)
        and not isinstance(actual, str)
        and not isinstance(expected, str)
    ):
        if len(actual) != len(expected):
            raise AssertionError(
                f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", path
            )
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, opts, f"{path}[{i}]")
        return
    raise TypeError(
        f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}."
    )


def _scalar(v) -> Tensor:
    """A Python number as a 0-d tensor of its widest dtype (float: float64, as torch)."""
    kind: Any = np.bool_ if isinstance(v, bool) else np.int64 if isinstance(v, int) else None
    kind = kind or (np.complex128 if isinstance(v, complex) else np.float64)
    return Tensor._wrap(np.asarray(v, kind))


def _tensors(actual: Tensor, expected: Tensor, opts, path: str) -> None:
    for what in ("shape", "dtype"):
        if what == "dtype" and not opts["check_dtype"]:
            continue
        a, e = getattr(actual, what), getattr(expected, what)
        if a != e:
            raise AssertionError(
                f"The values for attribute '{what}' do not match: {a} != {e}.", path
            )
    a, e = actual.detach()._host(), expected.detach()._host()
    if a.dtype != e.dtype:
        common = np.result_type(a, e)
        a, e = a.astype(common), e.astype(common)
    rtol, atol = opts["rtol"], opts["atol"]
    if rtol is None:
        pairs = [
            _TOLERANCES.get(actual.dtype, (0.0, 0.0)),
            _TOLERANCES.get(expected.dtype, (0.0, 0.0)),
        ]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    exact = a.dtype.kind in "biu"
    if exact:  # differences as torch reports them: integers, relative ones in float32
        a, e = a.astype(np.int64), e.astype(np.int64)
    close = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=opts["equal_nan"])
    if close.all():
        return
    kind = "equal" if exact else "close"
    allowed = (lambda tol: "") if exact else (lambda tol: f" (up to {tol} allowed)")
    if a.ndim == 0:  # as Python numbers
        x, y = a.item(), e.item()
        d = abs(x - y)
        raise AssertionError(
            f"Scalars are not {kind}!\n\nExpected {y} but got {x}.\n"
            f"Absolute difference: {d}{allowed(atol)}\n"
            f"Relative difference: {d / abs(y) if y else float('inf')}{allowed(rtol)}",
            path,
        )
    diff = np.abs(a - e)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = diff.astype(np.float32) / np.abs(e).astype(np.float32) if exact else diff / np.abs(e)
    bad = ~close
    diff, rel = np.where(bad, diff, 0), np.where(bad, rel, 0)
    at = [np.unravel_index(int(np.argmax(d)), d.shape) for d in (diff, rel)]
    raise AssertionError(
        f"Tensor-likes are not {kind}!\n\n"
        f"Mismatched elements: {int(bad.sum())} / {bad.size} ({100 * bad.sum() / bad.size:.1f}%)\n"
        f"Greatest absolute difference: {diff[at[0]].item()} at index "
        f"{tuple(int(i) for i in at[0])}{allowed(atol)}\n"
        f"Greatest relative difference: {rel[at[1]].item()} at index "
        f"{tuple(int(i) for i in at[1])}{allowed(rtol)}",
        path,
    )
