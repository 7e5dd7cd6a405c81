"""The strict vocabulary the rules are written in (``staged/autodiff/lax.py``): no VJP or
JVP rule reaches the public ops' promotion and broadcasting, and its constants are one
element, never a full-size array."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import numpy as np
import pytest

import staged
from staged import dtypes as dt
from staged.autodiff import lax
from tests.ops import harness as H
from tests.ops.db import OP_DB

AUTODIFF = str(Path(lax.__file__).parent)
FUSED_CALL = str(Path(lax.__file__).parent / "primitive.py")  # Fused.__call__
PUBLIC_OPS = str(Path(staged.__file__).parent / "eager" / "ops")


@contextlib.contextmanager
def _public_ops_under_rules():
    """Collects ``(public op, rule)`` for each call into ``staged/eager/ops`` made from a
    frame of ``staged/autodiff`` (a VJP or JVP rule, or the vocabulary itself)."""
    seen = set()

    def profile(frame, event, arg):
        if event != "call" or not frame.f_code.co_filename.startswith(PUBLIC_OPS):
            return
        up = frame.f_back
        while up is not None:
            if up.f_code.co_filename == FUSED_CALL:
                pass  # a Fused kernel calling its decomposition: look further up for a rule
            elif up.f_code.co_filename.startswith(AUTODIFF):
                seen.add(
                    (
                        frame.f_code.co_name,
                        f"{Path(up.f_code.co_filename).name}:{up.f_code.co_name}",
                    )
                )
                return
            up = up.f_back

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


def _first_samples():
    for e in OP_DB:
        if not e.differentiable:
            continue
        for d in ("float64", "complex128"):
            if d in e.dtypes and not e.skip_reason("vjp", d) and not e.skip_reason("jvp", d):
                for s in e.samples(d, np.random.default_rng(0))[:1]:
                    if any(H.differentiable(a) for a in H.arrays(s)):
                        yield e, d, s


def test_rules_never_reach_the_public_ops():
    """Every op of the database, backward (twice, so the rules' own rules run too) and
    forward-mode, in float64 and complex128."""
    rng = np.random.default_rng(0)
    with _public_ops_under_rules() as seen:
        for entry, _, sample in _first_samples():
            ins = H.staged_leaves(sample, True)
            outs = [
                o
                for o in H.flat(H.call(entry.op, sample, ins))
                if isinstance(o, staged.Tensor) and o.requires_grad
            ]
            wrt = [t for t in ins if t.requires_grad]
            if outs:
                us = [staged.tensor(H.random_like(rng, H.numpy(o))) for o in outs]
                grads = staged.autograd.grad(outs, wrt, us, allow_unused=True, create_graph=True)
                again = [g for g in grads if g is not None and g.requires_grad]
                if again:
                    staged.autograd.grad(
                        again, wrt, [staged.ones_like(g) for g in again], allow_unused=True
                    )
            tangents = [
                H.random_like(rng, a) if H.differentiable(a) else None for a in H.arrays(sample)
            ]
            H.forward_jvp(entry, sample, tangents)
    assert not seen, "rules calling public ops (op, from): " + ", ".join(sorted(map(str, seen)))


def test_constants_are_one_element():
    x = staged.randn(64, 32)
    c = lax.full_like(x, 0.5)
    assert c.dtype is dt.float32 and tuple(c.shape) == (64, 32)
    assert c._payload.strides == (0, 0) and not c._payload.flags.writeable
    assert np.all(c.numpy() == 0.5)
    h = lax.full_like(x.half(), 3)
    assert h.dtype is dt.float16

    def f(x):  # under capture: a 0-d constant, expanded
        return lax.mul(x, 0.5)

    graph = staged.capture(f, x).graph
    assert [np.size(a) for _, a in graph.consts] == [1]
    assert [op.prim.name for op in graph.ops][-2:] == ["expand", "mul"]


def test_strict_operands():
    """A complex number beside a real tensor is an error, not a silent promotion; a
    number takes the tensor's dtype (no promotion to float64)."""
    x = staged.ones(3)
    with pytest.raises(TypeError, match="cast the tensor"):
        lax.mul(x, 1j)
    assert lax.mul(lax.cast(x, dt.complex64), 1j).dtype is dt.complex64
    assert lax.add(x, 2.5).dtype is dt.float32
    assert lax.sub(1, x).numpy().tolist() == [0.0, 0.0, 0.0]
    assert lax.conj(x) is x and lax.real(x) is x and lax.cast(x, dt.float32) is x


def test_half_sums_add_in_float32():
    x = staged.ones(4096, dtype=staged.float16)
    assert lax.sum(x, (0,)).item() == 4096  # float16 alone sticks at 2048
