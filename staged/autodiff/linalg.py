"""Matrix products."""
from __future__ import annotations

import numpy as np

from .avals import Aval, ShapeError
from .primitive import Primitive, domain


def _matmul_rule(a, b):
    if a.ndim < 2 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied "
                         f"({'x'.join(map(str, a.shape))} and {'x'.join(map(str, b.shape))})")
    if a.dtype is not b.dtype:
        raise ShapeError(f"expected m1 and m2 to have the same dtype, but got: "
                         f"{a.dtype.name} != {b.dtype.name}")
    return Aval(a.shape[:-1] + b.shape[-1:], a.dtype)


def _matmul_jvp(primals, tangents, out):
    (a, b), (at, bt) = primals, tangents
    terms = [t for t in (at @ b if at is not None else None,
                         a @ bt if bt is not None else None) if t is not None]
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


matmul = Primitive("matmul", lambda a, b: np.matmul(a, b), _matmul_rule,
                   vjp=(lambda g, b: g @ b.mT.conj(), lambda g, a: a.mT.conj() @ g),
                   jvp=_matmul_jvp, node_name="MmBackward0",
                   domain=domain(bool="NumPy's boolean matmul is an OR of ANDs; cast to an "
                                 "integer dtype first"))
