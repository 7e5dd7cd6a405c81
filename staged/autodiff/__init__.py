"""The primitive registry: every primitive declared once (impl, shape rule, VJP, JVP)."""

from .avals import Aval, ShapeError  # noqa: F401
from .primitive import (
    ELEMENTWISE,
    FUSED,  # noqa: F401
    LINEAR,
    REGISTRY,
    ZERO,
    Fused,  # noqa: F401
    Primitive,
    Public,  # noqa: F401
    primitive,
)
from .jvp import jvp_rule  # noqa: F401
from .elementwise import *  # noqa: F401,F403
from .shape import (  # noqa: F401
    concat,
    expand,
    permute,
    reshape,
    strided,
    view_as_complex,
    view_as_real,
    view_dtype,
)
from .indexing import (
    barrier,
    check,
    gather,
    scatter,
    scatter_add,
    scatter_reduce,
    slice,  # noqa: F401
    slice_scatter,
)
from .reduction import argmax, argmin, reduce_max, reduce_min, reduce_prod, reduce_sum  # noqa: F401
from .scan import argsort, cumsum  # noqa: F401
from .linalg import matmul  # noqa: F401
from .nn import col2im, im2col  # noqa: F401
from .random import uniform  # noqa: F401
from .collective import all_gather, all_reduce, broadcast, reduce_scatter  # noqa: F401
