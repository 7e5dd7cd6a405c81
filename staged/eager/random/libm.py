"""float64 ``log``, ``log1p``, ``sin``, ``cos``, ``tan`` and ``exp`` as the C library
computes them, which is what torch's float64 distributions call.

NumPy's own loops are used where they give the C library's results bit for bit: it calls
the C library unless the CPU has vector loops of its own (on AVX-512 NumPy has some,
which differ from glibc in the last bit), so a probe compares each with ``math`` once,
on 4096 arguments, and a function that differs is computed with ``math`` element by
element instead.
"""

from __future__ import annotations

import math

import numpy as np

_PROBE = np.random.Generator(np.random.MT19937(0)).random(4096)
_ARGS = {
    "log": 1 - _PROBE,
    "log1p": -_PROBE,
    "sin": 2 * math.pi * _PROBE,
    "cos": 2 * math.pi * _PROBE,
    "tan": math.pi * (_PROBE - 0.5),
    "exp": 6 * _PROBE - 3,
}


def _c_library(name):
    ours, theirs = getattr(np, name), getattr(math, name)
    x = _ARGS[name]
    if np.array_equal(
        ours(x).view(np.uint64), np.array([theirs(v) for v in x.tolist()]).view(np.uint64)
    ):
        return ours
    each = np.frompyfunc(theirs, 1, 1)
    return lambda a: each(a).astype(np.float64)


log, log1p, sin, cos, tan, exp = (
    _c_library(n) for n in ("log", "log1p", "sin", "cos", "tan", "exp")
)
