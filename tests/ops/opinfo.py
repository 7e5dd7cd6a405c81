"""OpInfo: one entry per public op, swept by the generated tests in this package.

An entry names the staged op and its torch twin, yields sample inputs, and lists what
must be skipped with a reason (shown in the coverage table).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Sample:
    """Positional tensor/Python args and keyword args of one call (NumPy arrays stand for
    tensors; the sweep converts them for staged and for torch)."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    name: str = ""


@dataclass
class Skip:
    """Skip ``check`` (forward, vjp, fd, jvp, gradgrad, capture, llvm-cpu, onnx) for the
    given dtypes (None: all), with the reason printed in the coverage table."""

    check: str
    reason: str
    dtypes: tuple | None = None


@dataclass
class OpInfo:
    name: str                      # test id and coverage-table row
    op: Callable                   # staged callable: op(*tensors_and_args, **kwargs)
    torch_op: Callable             # the torch 2.13 twin with the same signature
    samples: Callable              # samples(dtype, rng) -> iterable of Sample
    dtypes: tuple = ("float32", "float64")
    differentiable: bool = True    # gradients flow to floating/complex tensor args
    skips: list = field(default_factory=list)
    rtol: float | None = None      # per-entry tolerance override
    atol: float | None = None

    def skip_reason(self, check: str, dtype: str) -> str | None:
        for s in self.skips:
            if s.check == check and (s.dtypes is None or dtype in s.dtypes):
                return s.reason
        return None
