"""OpInfo: one entry per public op, swept by the generated tests in ``test_sweep.py``.

How to add an op (any ``tests/ops/db/<family>.py`` module with a list ``ENTRIES``)::

    OpInfo("exp", staged.exp, torch.exp, samples, dtypes=("float32", "float64"))

* ``op`` / ``torch_op`` are called with the same arguments: a sample's args and kwargs,
  where NumPy arrays (also inside lists/tuples, as for ``cat``) become tensors of that
  dtype; anything else (ints, floats, dims, None) is passed as is. They may return a
  tensor or a tuple/list/namedtuple of tensors.
* ``samples(dtype, rng)`` returns a list of ``Sample`` for ``dtype`` (a NumPy dtype
  name); ``rng`` is a seeded ``np.random.Generator``. Cover broadcasting, a size-0 and a
  0-d (scalar) shape where the op allows them, and keep samples away from points where
  the op is not differentiable (finite differences straddle them) unless that point
  is what the sample tests, then skip ``fd`` for it with a reason.
* Gradients flow to every float/complex array argument; integer and bool arrays
  (indices, masks) get none. ``differentiable=False`` for ops with integer/bool outputs.
* ``skips``: ``Skip(check, reason, dtypes)``; checks are those in ``CHECKS``. Every
  skip shows in the coverage table (``python -m tests.ops.coverage``), so the reason
  must say *why* (a NumPy/torch/IREE limitation, a PyTorch semantics choice), not
  just that it fails. ``Skip("complex", reason)`` explains why an op is not swept with
  complex dtypes.

Test ids read ``<name>-<dtype>-sample<k>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable

import numpy as np

# forward vs torch; VJP vs torch; VJP vs finite differences (float64); JVP vs torch.func.jvp;
# grad-of-grad vs finite differences (float64); each captured primitive's shape rule vs
# its impl; capture + NumPy interpreter vs eager; the compiled llvm-cpu module vs eager
CHECKS = ("forward", "vjp", "fd", "jvp", "gradgrad", "shape", "capture", "llvm-cpu")


@dataclass
class Sample:
    """Positional tensor/Python args and keyword args of one call (NumPy arrays stand for
    tensors; the sweep converts them for staged and for torch)."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    name: str = ""


@dataclass
class Skip:
    """Skip ``check`` (one of ``CHECKS``, or "complex") for the given dtypes (None: all),
    with the reason printed in the coverage table."""

    check: str
    reason: str
    dtypes: tuple | None = None


@dataclass
class OpInfo:
    name: str  # test id and coverage-table row
    op: Callable  # staged callable: op(*tensors_and_args, **kwargs)
    torch_op: Callable  # the torch 2.13 twin with the same signature
    samples: Callable  # samples(dtype, rng) -> list of Sample
    dtypes: tuple = ("float32", "float64")
    differentiable: bool = True  # gradients flow to floating/complex tensor args
    skips: list = field(default_factory=list)
    rtol: float | None = None  # per-entry tolerance override (not for float16/bfloat16,
    atol: float | None = None  # which keep 1e-2 / 3e-2)
    # the captured graph against eager: bit for bit, unless eager runs another algorithm
    # (LAPACK for linalg.solve, where the graph unrolls Gaussian elimination): (rtol, atol)
    capture_tol: tuple = (0, 0)

    def skip_reason(self, check: str, dtype: str) -> str | None:
        for s in self.skips:
            if s.check == check and (s.dtypes is None or dtype in s.dtypes):
                return s.reason
        return None


# --- sample helpers for entries ---------------------------------------------------------------
def arr(rng, dtype, shape, low=-2.0, high=2.0):
    """Uniform samples in [low, high) of ``shape`` in ``dtype`` (a NumPy dtype name)."""
    d = np.dtype(dtype)
    if d.kind == "c":
        return np.asarray(rng.uniform(low, high, shape) + 1j * rng.uniform(low, high, shape), d)
    if d.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    if d.kind in "iu":
        return np.asarray(rng.integers(int(low), int(high) + 1, shape), d)
    return np.asarray(rng.uniform(low, high, shape), d)


def index(rng, high, shape):
    """An int64 index array with entries in [0, high)."""
    return np.asarray(rng.integers(0, high, shape), np.int64)


def distinct(rng, dtype, shape, step=0.25):
    """A permutation of values ``step`` apart, centred on 0: no ties (max/min, sort and
    pooling gradients are unique; finite differences never straddle a tie)."""
    n = int(np.prod(shape))
    return np.asarray((rng.permutation(n).reshape(shape) - n / 2) * step, dtype)
