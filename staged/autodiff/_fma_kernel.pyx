# distutils: language = c++
# distutils: extra_compile_args = -O3 -std=c++17
# cython: language_level=3
"""``a * b + c`` rounded once (C's ``fma``; the FMA instruction, vectorized, where the CPU
has it: ``_fma_kernel.hpp``), for the ``fma`` primitive and the in-place updates that write
a tensor's memory directly (Note [fused multiply-add] in ``elementwise.py``). Where this
is not built, they run ``autodiff/fma.py``'s NumPy emulations."""

import numpy as np

cimport cython
from libc.stdint cimport int64_t

cdef extern from "_fma_kernel.hpp" namespace "staged_fma":
    void fma_loop[T](
        const T* a, const T* b, int64_t b_step, const T* c, int64_t c_step, T* out, int64_t n
    ) nogil

ctypedef fused real:
    float
    double


@cython.boundscheck(False)
@cython.wraparound(False)
cdef void _run(const real[::1] a, const real[::1] b, const real[::1] c, real[::1] out) noexcept nogil:
    if out.shape[0]:
        fma_loop(
            &a[0],
            &b[0],
            1 if b.shape[0] > 1 else 0,
            &c[0],
            1 if c.shape[0] > 1 else 0,
            &out[0],
            out.shape[0],
        )


def fma(a, b, c, out=None):
    """``a * b + c`` rounded once, for float32 or float64 arrays of one shape and dtype
    (``b`` and ``c`` may be numbers, or one number broadcast; another broadcast operand is
    laid out in full first), into ``out`` (contiguous, of that shape; it may be ``a`` or
    ``c``) or a new array."""
    if out is None:
        out = np.empty(a.shape, a.dtype)
    fa = np.ascontiguousarray(a).reshape(-1)
    fb, fc = (_one(x, a.dtype) for x in (b, c))
    if a.dtype == np.float32:
        _run[float](fa, fb, fc, out.reshape(-1))
    else:
        _run[double](fa, fb, fc, out.reshape(-1))
    return out


def _one(x, dtype):
    """``x`` flat, or as one element where it is a number or one number broadcast."""
    if not isinstance(x, np.ndarray):
        return np.array([x], dtype)
    if x.size > 1 and not any(x.strides):
        return np.array([x.flat[0]], dtype)
    return np.ascontiguousarray(x).reshape(-1)
