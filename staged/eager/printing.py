"""How tensors print: ``set_printoptions``, torch's names over NumPy's ``array2string``."""

from __future__ import annotations

import math
import sys

from typing import Any

import numpy as np

from .. import dtypes as dt

_PROFILES: dict[str, dict[str, Any]] = {
    "default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
    "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
    "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80),
}
OPTIONS: dict[str, Any] = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(
    precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None
) -> None:
    """torch's ``set_printoptions``: ``profile`` ("default", "short", "full") first, then
    the options given; ``sci_mode`` True / False forces or forbids scientific notation
    (None: NumPy's choice)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        OPTIONS.update(_PROFILES[profile])
    given = dict(precision=precision, threshold=threshold, edgeitems=edgeitems, linewidth=linewidth)
    OPTIONS.update({k: v for k, v in given.items() if v is not None})
    OPTIONS["sci_mode"] = sci_mode


def get_printoptions() -> dict:
    """The current options, as torch's ``get_printoptions``."""
    return dict(OPTIONS)


def array_text(a: np.ndarray, prefix: str) -> str:
    """``a`` as the body of a tensor's repr, under the current options."""
    o = OPTIONS
    kw: dict = {}
    if a.dtype in dt.ML_NP:  # bfloat16, float8s: NumPy would print them as other numbers
        a = a.astype(np.float32)
    if a.dtype.kind == "f":
        kw["formatter"] = {"float_kind": _float_format(a, o["precision"], o["sci_mode"])}
    threshold = o["threshold"]
    if a.size == 0 and a.ndim > 1:
        return f"[], size={a.shape}"
    return np.array2string(
        a,
        separator=", ",
        prefix=prefix,
        precision=o["precision"],
        threshold=sys.maxsize if threshold == math.inf else int(threshold),
        edgeitems=o["edgeitems"],
        max_line_width=o["linewidth"],
        **kw,
    )


def add_suffixes(text: str, suffixes: list, indent: int, force_newline: bool = False) -> str:
    """``text`` and ``, suffix`` each, closed: torch's ``_add_suffixes``, which starts a
    suffix on a new line, ``indent`` in, where it would reach past the line width (or the
    first so where ``force_newline``)."""
    out, width = [text], len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if force_newline or width + len(s) + 2 > OPTIONS["linewidth"]:
            out.append(",\n" + " " * indent + s)
            width, force_newline = indent + len(s), False
        else:
            out.append(", " + s)
            width += len(s) + 2
    return "".join(out) + ")"


def _float_format(a: np.ndarray, precision: int, sci_mode):
    """torch's choice (``torch/_tensor_str.py``): whole numbers as ``1.``, fixed
    ``precision`` digits, or scientific where the nonzero finite magnitudes span more than
    1000x, exceed 1e8 or (not whole) fall below 1e-4; ``sci_mode`` overrides it."""
    v = np.abs(a[np.isfinite(a) & (a != 0)].astype(np.float64))
    whole = bool(np.all(v == np.ceil(v)))
    sci = False
    if v.size:
        lo, hi = v.min(), v.max()
        sci = hi / lo > 1000 or hi > 1e8 or (not whole and lo < 1e-4)
    if sci_mode is not None:
        sci = sci_mode
    spec = f".{precision}e" if sci else ".0f" if whole else f".{precision}f"
    dot = "." if whole and not sci else ""

    def text(x) -> str:
        return f"{x:{spec}}{dot}" if np.isfinite(x) else str(x)

    finite = a[np.isfinite(a)]  # the widest is the largest or the most negative
    ends = (finite.min(), finite.max()) if finite.size else ()
    width = max((len(text(x)) for x in ends), default=0)
    return lambda x: text(x).rjust(width)
