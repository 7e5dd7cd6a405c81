"""One lowering table per target (MLIR, ONNX), keyed by ``Primitive``.

A table maps each primitive to its lowering function and records, per primitive, the
dtypes the target cannot lower with the reason why (its gaps: MLIR's complex dialect has
no arcsine). A reason is keyed by a dtype class (``"int"``, ``"complex"``…, see
``DType.dclass``) or by one dtype's name (``"float64"``) for a gap of a single dtype.
Dtypes outside a primitive's domain (``Primitive(domain=...)``) are never lowered, on
any target: ``reason`` and ``gaps`` read the primitive's own reasons first.
``entry``/``walk`` are the registry's coverage walk (tests/test_registry.py,
tests/ops/coverage.py).
"""

from __future__ import annotations

from ..autodiff.primitive import REGISTRY


class LoweringError(Exception):
    """A graph op cannot be lowered for a target (the message names the primitive, the
    dtype and the user's file:line)."""


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

    def gaps(self, prim_name: str) -> dict:
        """{dtype class or name: why} for every dtype ``prim_name`` does not lower on: its
        domain's reasons, then the target's own."""
        prim = REGISTRY.get(prim_name)
        return {**(prim.unsupported if prim is not None else {}), **self.reasons.get(prim_name, {})}

    def reason(self, prim_name: str, d) -> str | None:
        """Why ``prim_name`` does not lower on dtype ``d`` (its name first, then its class)."""
        prim = REGISTRY.get(prim_name)
        outside = prim is not None and prim.unsupported.get(d.dclass)
        if outside:
            return outside
        reasons = self.reasons.get(prim_name, {})
        return reasons.get(d.name) or reasons.get(d.dclass)

    def entry(self, prim_name: str) -> dict | None:
        """``{"lowered": bool, "unsupported": {dtype class or name: reason}}``, or None
        when the primitive has neither a lowering nor a recorded reason."""
        lowered = any(p.name == prim_name for p in self.lowerings)
        gaps = self.gaps(prim_name)
        if not lowered and not gaps:
            return None
        return {"lowered": lowered, "unsupported": gaps}

    def walk(self, names) -> dict:
        """``{name: entry(name)}`` for the primitive ``names`` (the registry walk)."""
        return {n: self.entry(n) for n in sorted(names)}
