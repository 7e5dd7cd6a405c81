"""One lowering table per target (MLIR, ONNX), keyed by ``Primitive``.

A table maps each primitive to its lowering function and records, per primitive, the
dtypes it cannot lower with the reason why. A reason is keyed by a dtype class (``"int"``,
``"complex"``…, see ``dclass``) or by one dtype's name (``"float64"``) for a gap of a
single dtype; ``reason`` looks the name up first. ``entry``/``walk`` are the registry's
coverage walk (tests/test_registry.py, tests/ops/coverage.py).
"""
from __future__ import annotations

from .. import dtypes as dt


class LoweringError(Exception):
    """A graph op cannot be lowered for a target (the message names the primitive, the
    dtype and the user's file:line)."""


def dclass(d) -> str:
    """The dtype class lowerings dispatch on: bool, int, uint, float or complex."""
    if d is dt.bool_:
        return "bool"
    if d.is_complex:
        return "complex"
    if d.is_floating_point:
        return "float"
    return "uint" if not d.is_signed else "int"


class Table:
    """The lowerings of one target: ``lowerings`` {Primitive: fn}, ``reasons``
    {primitive name: {dtype class or dtype name: why it has no lowering}}."""

    def __init__(self, target: str):
        self.target = target
        self.lowerings: dict = {}
        self.reasons: dict = {}

    def lowering(self, *prims):
        """Decorator registering ``fn`` as the lowering of ``prims``."""
        def register(fn):
            for p in prims:
                self.lowerings[p] = fn
            return fn
        return register

    def unsupported(self, prim_name: str, reasons: dict) -> None:
        """Record why ``prim_name`` has no lowering for some dtype classes or dtypes."""
        self.reasons.setdefault(prim_name, {}).update(reasons)

    def reason(self, prim_name: str, d) -> str | None:
        """Why ``prim_name`` does not lower on dtype ``d`` (its name first, then its class)."""
        reasons = self.reasons.get(prim_name, {})
        return reasons.get(d.name) or reasons.get(dclass(d))

    def entry(self, prim_name: str) -> dict | None:
        """``{"lowered": bool, "unsupported": {dtype class or name: reason}}``, or None
        when the primitive has neither a lowering nor a recorded reason."""
        lowered = any(p.name == prim_name for p in self.lowerings)
        if not lowered and prim_name not in self.reasons:
            return None
        return {"lowered": lowered, "unsupported": dict(self.reasons.get(prim_name, {}))}

    def walk(self, names) -> dict:
        """``{name: entry(name)}`` for the primitive ``names`` (the registry walk)."""
        return {n: self.entry(n) for n in sorted(names)}
