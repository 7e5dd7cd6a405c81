"""``torch.return_types``' counterpart: the named tuples staged's ops return, under torch's
names, so ``isinstance(staged.max(x, 1), staged.return_types.max)`` holds. These are the
very classes the ops build (namedtuples, made where the op is), not copies. Where torch has
two classes of the same fields, staged returns one for both: ``slogdet`` is
``linalg_slogdet``, ``qr`` ``linalg_qr`` and ``lu_unpack`` ``linalg_lu``. Not there:
torch's ``*_out`` classes (``out=`` returns the op's own class)."""

from .eager.ops.composite import FrexpResult as frexp
from .eager.ops.quantiles import HistogramddResult as histogramdd
from .eager.ops.quantiles import HistogramResult as histogram
from .eager.ops.quantiles import KthvalueResult as kthvalue, MedianResult as median
from .eager.ops.quantiles import ModeResult as mode, NanmedianResult as nanmedian
from .eager.ops.reduction import AminmaxResult as aminmax, CummaxResult as cummax
from .eager.ops.reduction import CumminResult as cummin, MaxResult as max, MinResult as min
from .eager.ops.reduction import SortResult as sort, TopkResult as topk
from .linalg._composed import CholeskyExResult as linalg_cholesky_ex
from .linalg._geqrf import GeqrfResult as geqrf
from .linalg._composed import InvExResult as linalg_inv_ex, LUResult as linalg_lu
from .linalg._composed import LUFactorExResult as linalg_lu_factor_ex
from .linalg._composed import LUFactorResult as linalg_lu_factor
from .linalg._composed import SolveExResult as linalg_solve_ex
from .linalg._core import SlogdetResult as linalg_slogdet
from .linalg._lapack import EigResult as linalg_eig, EighResult as linalg_eigh
from .linalg._lapack import LstsqResult as linalg_lstsq, QRResult as linalg_qr
from .linalg._lapack import SvdResult as svd, SVDResult as linalg_svd
from .linalg._lapack import TriangularSolveResult as triangular_solve
from .linalg._ldl import LDLFactorExResult as linalg_ldl_factor_ex
from .linalg._ldl import LDLFactorResult as linalg_ldl_factor

slogdet, qr, lu_unpack = linalg_slogdet, linalg_qr, linalg_lu

__all__ = [
    "aminmax",
    "cummax",
    "cummin",
    "frexp",
    "geqrf",
    "histogram",
    "histogramdd",
    "kthvalue",
    "linalg_cholesky_ex",
    "linalg_eig",
    "linalg_eigh",
    "linalg_inv_ex",
    "linalg_ldl_factor",
    "linalg_ldl_factor_ex",
    "linalg_lstsq",
    "linalg_lu",
    "linalg_lu_factor",
    "linalg_lu_factor_ex",
    "linalg_qr",
    "linalg_slogdet",
    "linalg_solve_ex",
    "linalg_svd",
    "lu_unpack",
    "max",
    "median",
    "min",
    "mode",
    "nanmedian",
    "qr",
    "slogdet",
    "sort",
    "svd",
    "topk",
    "triangular_solve",
]
all_return_types = [globals()[n] for n in __all__]  # (as torch's: the classes)
__all__ += ["all_return_types"]


def _repr(self) -> str:
    """torch's structseq form: ``staged.return_types.max(\nvalues=...,\nindices=...)``."""
    fields = ",\n".join(f"{k}={v!r}" for k, v in zip(self._fields, self))
    return f"staged.return_types.{type(self).__name__}(\n{fields})"


for _cls in all_return_types:
    _cls.__repr__ = _repr
