"""``torch.linalg``'s counterpart: norms, products, solves and the factorizations that
training and scientific programs use. Real matrices (float32, float64); ``eig`` and
``eigvals`` have complex results. The SVD, ``eig``, ``pinv`` and what is built on them
(the 2/-2/'nuc' norms, ``cond`` of those) take complex matrices too, eagerly, under
forward-mode AD and vmap (not captured); ``solve``, ``inv``, ``inv_ex``, ``det``,
``slogdet``, ``solve_triangular``, the LU family and ``cholesky``/``cholesky_ex``/
``cholesky_solve`` take them everywhere, with torch's gradients.

* Compositions of staged's ops, which run, differentiate (both modes, to any order),
  compile and batch everywhere (``_core.py``, ``_composed.py``): the norms and products,
  ``cholesky``/``cholesky_ex``, ``solve_triangular``, the LU family (``lu_factor``,
  ``lu_factor_ex``, ``lu``, ``lu_solve``), ``matrix_exp``, ``vander``,
  ``householder_product``. They are unrolled over the matrix size: for the small matrices
  of a model.
* ``solve``, ``inv``, ``det`` and ``slogdet`` run LAPACK eagerly (one kernel, one autograd
  Node) and are Gaussian elimination in staged's ops elsewhere (``_core.py``); so do
  ``inv_ex``, ``solve_ex``, ``tensorinv`` and ``tensorsolve`` (``_ex``: for invertible
  matrices, the LU composition otherwise, to report ``info``).
* The SVD, eigendecompositions, QR, ``pinv``, ``lstsq`` and what is built on them
  (``svdvals``, ``eigvalsh``, ``eigvals``, ``matrix_rank``, ``cond``, the 2/-2/'nuc'
  norms) run LAPACK eagerly, with torch's backward formulas (``_lapack.py``); under
  ``staged.compile``, forward-mode AD or vmap QR is Householder reflections, ``eigh`` and
  the SVD Jacobi rotations in staged's ops (``_orthogonal.py``). ``eig``/``eigvals`` and
  complex SVDs and ``pinv`` have no composition: forward-mode AD takes their tangents
  from torch's JVP formulas and vmap binds LAPACK once on the batch, and a capture
  raises an error naming the op.

* ``ldl_factor``, ``ldl_factor_ex`` and ``ldl_solve`` (Bunch-Kaufman, LAPACK's compact
  form and pivots) are LAPACK's ``?sytf2``/``?hetf2`` and ``?sytrs``/``?hetrs`` written in
  NumPy (``_ldl.py``), also for complex matrices: eager only, and without a gradient, as
  torch's.
"""

from __future__ import annotations

from ..autodiff.indexing import LinAlgError
from .. import _where
from ..eager import autocast as _autocast
from ..eager.ops.linalg import matmul
from ..eager.tensor import Tensor
from ._composed import (
    _torch_lu,
    _torch_lu_solve,
    _torch_vander,
    cholesky_ex,
    cholesky_inverse,
    cholesky_solve,
    householder_product,
    inv_ex,
    lu,
    lu_factor,
    lu_factor_ex,
    lu_solve,
    lu_unpack,
    matrix_exp,
    solve_ex,
    tensorinv,
    tensorsolve,
    vander,
)
from ._core import (
    _cholesky,
    _logdet,
    _torch_chain_matmul,
    cholesky,
    cross,
    det,
    diagonal,
    inv,
    matrix_power,
    multi_dot,
    slogdet,
    solve,
    solve_triangular,
    vecdot,
    vector_norm,
)
from ._lapack import (
    _frobenius_norm,
    _nuclear_norm,
    _pinverse,
    _torch_norm,
    _torch_qr,
    _torch_svd,
    _triangular_solve,
    cond,
    eig,
    eigh,
    eigvals,
    eigvalsh,
    lstsq,
    matrix_norm,
    matrix_rank,
    norm,
    pinv,
    qr,
    svd,
    svdvals,
)
from ._ldl import ldl_factor, ldl_factor_ex, ldl_solve
from ._geqrf import geqrf as _geqrf, ormqr as _ormqr
from ._lowrank import pca_lowrank as _pca_lowrank, svd_lowrank as _svd_lowrank

__all__ = [
    "LinAlgError",
    "cholesky",
    "cholesky_ex",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "householder_product",
    "inv",
    "inv_ex",
    "ldl_factor",
    "ldl_factor_ex",
    "ldl_solve",
    "lstsq",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "matmul",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensorinv",
    "tensorsolve",
    "vander",
    "vecdot",
    "vector_norm",
]

# the ops on torch's autocast lists apply its policy (Note [autocast] in eager/autocast.py)
globals().update(_autocast.hook(globals(), "linalg."))
# the others name the user's line in their errors and take part in the torch function protocol
globals().update(
    {
        n: _where.sited(f)
        for n, f in ((n, globals()[n]) for n in __all__)
        if not (hasattr(f, "sited") or isinstance(f, type))  # (LinAlgError)
    }
)

# --- torch's top-level names for these: staged.det, Tensor.det ... -------------------------
# staged/__init__.py exports them; they are Tensor methods too, but for those in FUNCTIONS
TOP_LEVEL = {
    name: _autocast.sited(fn, name)
    for name, fn in {
        "inverse": inv,
        "det": det,
        "logdet": _logdet,
        "slogdet": slogdet,
        "matrix_power": matrix_power,
        "cholesky": _cholesky,
        "cholesky_solve": cholesky_solve,
        "cholesky_inverse": cholesky_inverse,
        "svd": _torch_svd,
        "norm": _torch_norm,
        "qr": _torch_qr,
        "pinverse": _pinverse,
        "matrix_exp": matrix_exp,
        "lu_solve": _torch_lu_solve,
        "lu": _torch_lu,
        "lu_unpack": lu_unpack,
        "orgqr": householder_product,
        "vander": _torch_vander,
        "chain_matmul": _torch_chain_matmul,
        "geqrf": _geqrf,
        "ormqr": _ormqr,
        "svd_lowrank": _svd_lowrank,
        "pca_lowrank": _pca_lowrank,
        "triangular_solve": _triangular_solve,
        "frobenius_norm": _frobenius_norm,
        "nuclear_norm": _nuclear_norm,
    }.items()
}
# torch has no Tensor method of these
FUNCTIONS = (
    "lu_unpack",
    "vander",
    "chain_matmul",
    "frobenius_norm",
    "nuclear_norm",
    "svd_lowrank",
    "pca_lowrank",
)
for _name, _fn in TOP_LEVEL.items():
    if _name not in FUNCTIONS:
        setattr(Tensor, _name, _fn)
