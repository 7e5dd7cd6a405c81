"""Forward mode from the registry: a primitive's JVP rule, its tag made a function."""

from __future__ import annotations

from . import lax
from .primitive import ELEMENTWISE, LINEAR, ZERO


def jvp_rule(prim):
    """``prim``'s JVP as a function ``jvp(primals, tangents, out, **params)``; a tangent
    is None where that input has none, and so is the result where the output has none.

    Tags become functions here: ELEMENTWISE is ``sum_i conj(vjp_i(conj(t_i)))``, LINEAR
    applies the primitive to the tangents (zeros for missing ones), ZERO gives None.
    """
    jvp = prim.jvp
    if jvp is None:
        raise NotImplementedError(f"primitive {prim.name!r} has no JVP rule")
    if callable(jvp):
        return jvp
    if jvp == ZERO:
        return lambda primals, tangents, out, **params: None
    if jvp == LINEAR:

        def linear(primals, tangents, out, **params):
            if all(t is None for t in tangents):
                return None
            return prim(
                *(lax.full_like(p, 0) if t is None else t for p, t in zip(primals, tangents)),
                **params,
            )

        return linear
    if jvp == ELEMENTWISE:

        def elementwise(primals, tangents, out, **params):
            named = dict(zip(prim.inputs, primals), out=out, **params)
            total = None
            for rule, t in zip(prim.vjp, tangents):
                if t is None or rule is None:
                    continue
                kw = {n: named[n] for n in rule.inputs + rule.static}
                kw.update({n + "_aval": named[n]._aval() for n in rule.avals})
                if rule.wants_out:
                    kw["out"] = out
                term = lax.conj(rule.fn(lax.conj(t), **kw))
                total = term if total is None else lax.add(total, term)
            return total

        return elementwise
    raise ValueError(f"primitive {prim.name!r}: unknown JVP tag {jvp!r}")
