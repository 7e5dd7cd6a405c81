# distutils: language = c++
# distutils: extra_compile_args = -O2 -std=c++17
# cython: language_level=3
"""torch's CPU order of tied entries for sort, topk and kthvalue (Note [torch's order of
ties] in ``_torch_order.hpp``); ``scan._argsort`` calls ``order`` where it is built."""

import numpy as np

cimport cython
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t
from libcpp cimport bool as cbool

cdef extern from "_torch_order.hpp" namespace "staged_order":
    void order_rows[T](const T* v, int64_t rows, int64_t n, int kind, int64_t k,
                       cbool descending, cbool sorted, int64_t* out) nogil

ctypedef fused real:
    float
    double
    int64_t
    int32_t
    int16_t
    int8_t
    uint8_t

KINDS = {"sort": 0, "topk": 1, "topk_unsorted": 1, "kth": 2}


@cython.boundscheck(False)
@cython.wraparound(False)
def _rows(const real[:, ::1] v, int kind, int64_t k, bint descending, bint sorted):
    cdef int64_t rows = v.shape[0], n = v.shape[1]
    out = np.empty((rows, k), np.int64)
    cdef int64_t[:, ::1] o = out
    if rows and n and k:
        with nogil:
            order_rows(&v[0, 0], rows, n, kind, k, descending, sorted, &o[0, 0])
    return out


def order(x, order, k, descending):
    """The first ``k`` indices along the last dim of ``x`` (a C-contiguous array of one of
    ``real``'s dtypes) in torch's ``order``: "sort", "topk", "topk_unsorted" or "kth"."""
    flat = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    out = _rows(flat, KINDS[order], k, descending, order != "topk_unsorted")
    return out.reshape(x.shape[:-1] + (k,))
