"""Primitive samples recorded from the op database.

Every entry's samples run eagerly, forward and backward, under a dispatch layer that keeps
the operands and parameters of each primitive bound. A primitive that some public op
reaches therefore needs no hand-written samples: ``tests/autodiff/test_primitives.py``
and ``tests/lower/test_mlir.py`` use these where they have none of their own.
"""

from __future__ import annotations

import functools
from collections import defaultdict

import numpy as np

import staged
from staged.eager import dispatch
from tests.ops.db import OP_DB
from tests.ops.harness import call, flat, staged_leaves

PER_SIGNATURE = 2  # samples kept per (primitive, operand dtypes)


@functools.cache
def recorded() -> dict:
    """{primitive name: [(operand arrays, params)]}, at most ``PER_SIGNATURE`` samples for
    each combination of operand dtypes."""
    out = defaultdict(list)
    count = defaultdict(int)

    def layer(apply):
        def record(prim, inputs, params):
            if all(type(t._payload) is np.ndarray for t in inputs):
                key = (prim.name, tuple(t._payload.dtype for t in inputs))
                if count[key] < PER_SIGNATURE:
                    count[key] += 1
                    out[prim.name].append(([t._payload.copy() for t in inputs], dict(params)))
            return apply(prim, inputs, params)

        return record

    dispatch.set_layer("record", layer)
    try:
        for entry in OP_DB:
            rng = np.random.default_rng(0)
            for dtype in entry.dtypes:
                for sample in entry.samples(dtype, rng):
                    _run(entry, sample)
    finally:
        dispatch.set_layer("record", None)
    return dict(out)


def _run(entry, sample) -> None:
    """The sample's forward and, where gradients flow, its backward (errors are the
    sweep's to report, not this recorder's)."""
    try:
        leaves = staged_leaves(sample, requires_grad=entry.differentiable)
        outs = [
            o
            for o in flat(call(entry.op, sample, leaves))
            if isinstance(o, staged.Tensor) and o.requires_grad
        ]
        wrt = [t for t in leaves if t.requires_grad]
        if outs and wrt:
            staged.autograd.grad(outs, wrt, [o.detach() * 0 + 1 for o in outs], allow_unused=True)
    except Exception:  # noqa: BLE001 - a failing sample fails in the sweep, with its id
        pass


def samples(name: str) -> list:
    """The recorded samples of primitive ``name`` ([] if no public op reaches it)."""
    return recorded().get(name, [])
