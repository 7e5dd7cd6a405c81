"""Numbers read by ``.item()`` from a tensor being traced (Note [traced items]), and the
calls of functions marked ``torch.compiler.disable`` (Note [disabled calls]): what a
trace hands the step's Python in their place, and how a compiled call gives their values.

Note [traced items]: a training step that ends ``return loss.item()`` (or returns a dict
of ``.item()``s for logging) needs the value of a tensor the trace has no data for. torch
breaks its graph there and reads the number eagerly. Here ``.item()`` of a traced tensor
gives a ``TracedScalar``: a number to be, standing for the tensor's value at the read
(a later in-place write to the tensor does not change it, as it does not change eager's
Python number). Arithmetic with Python numbers and other traced scalars records the
expression (``loss.item() * x.size(0)``, ``sum(l.item() for l in losses)``), evaluated
with Python's own operators when the compiled call gives its results: the step returns
the tensors the expression reads, and each call's result holds Python numbers equal to
eager's, read as eager reads them (``Tensor.item()``; reading them waits for the call).
What needs the number while tracing (a branch, ``float()``, formatting, a tensor op, a
comparison) raises ``CaptureError`` naming both lines; so does storing it where a
compiled call cannot set it (an attribute, a global, a list: the trace checks what it
changed, ``tracing/guards.py``). One kept anyway (passed to a library) raises at any use
after the trace: it never gets a value.

Note [disabled calls]: a function marked ``torch.compiler.disable`` is where torch breaks
its graph on purpose, mostly to log (``ACT_LOG.append(h.abs().mean().item())``). staged
never splits a graph. A marked function that returns values is traced with its caller,
as any function: its result flows on in the graph (``staged.compiler.disable`` reads its
bytecode). One that returns nothing, called for its effects, is not run by the trace
(``Tracer.host_call``): the call is recorded, with the values its tensor arguments (and
traced scalars) have there as outputs of the graph, and each compiled call makes it in
Python after its graph has run, with those values as tensors (``Captured.host_calls``).
Inside the trace it returns None, as it does in eager. Its effects on Python state happen
at every call, as eager's do, in the order of the step's calls; but after the graph, so
a function that writes a tensor the step reads after calling it (rather than only
looking) must not be marked, and an exception it raises comes at the end of the call,
after the step's updates. A step traced with ``rng="counter"`` (a saved step, an ONNX
export) runs no Python, so such a call raises there.
"""

from __future__ import annotations

import math
import numbers
import operator
import weakref
from typing import NoReturn

import numpy as np

from ..eager.tensor import Tensor
from .symbolic import CaptureError, user_location

_OPS = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
    "neg": operator.neg,
    "pos": operator.pos,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
    "trunc": math.trunc,
}


def evaluate(expr, read):
    """The value of ``expr``: ``("out", k)`` is ``read(k)``, ``("const", v)`` is ``v``,
    ``(op, *operands)`` applies ``_OPS[op]``. Lists (a saved step's JSON) read as tuples."""
    kind = expr[0]
    if kind == "out":
        return read(expr[1])
    if kind == "const":
        return expr[1]
    return _OPS[kind](*(evaluate(a, read) for a in expr[1:]))


def reads(expr) -> list:
    """The ``("value", v)`` / ``("out", k)`` leaves of ``expr``, in order."""
    if expr[0] in ("value", "out"):
        return [expr]
    if expr[0] == "const":
        return []
    return [leaf for a in expr[1:] for leaf in reads(a)]


def relabel(expr, label):
    """``expr`` with each tensor leaf replaced by ``label(leaf)``."""
    if expr[0] in ("value", "out"):
        return label(expr)
    if expr[0] == "const":
        return expr
    return (expr[0], *(relabel(a, label) for a in expr[1:]))


def _operand(x):
    """``x``'s expression, or None for what is not a number (NotImplemented then)."""
    if type(x) is TracedScalar:
        return x.expr
    if isinstance(x, (numbers.Number, np.generic)):
        return ("const", x)
    return None


def _binary(op: str, reflected: bool = False):
    def method(self, other):
        o = _operand(other)
        if o is None:
            if isinstance(other, Tensor):  # it would need the number now
                self._needed(f"a tensor op ({op})")
            return NotImplemented
        return self._made((op, o, self.expr) if reflected else (op, self.expr, o))

    method.__name__ = f"__{'r' if reflected else ''}{op}__"
    return method


def _unary(op: str):
    def method(self):
        return self._made((op, self.expr))

    method.__name__ = f"__{op}__"
    return method


def _needs(what: str):
    def method(self, *args, **kwargs):
        self._needed(what)

    method.__name__ = what
    return method


class TracedScalar:
    """The Python number ``.item()`` of a traced tensor gives (Note [traced items])."""

    __slots__ = ("expr", "where", "tracer", "__weakref__")

    def __init__(self, expr, source):
        """``expr``: its expression (leaves ``("value", v)``, graph values); ``source``:
        the traced scalar it comes from, or the tracer (for a new one)."""
        self.expr = expr
        if type(source) is TracedScalar:
            self.where, self.tracer = source.where, source.tracer
        else:
            self.where, self.tracer = user_location(), source

    def _made(self, expr) -> TracedScalar:
        """A traced scalar of ``expr``, from this one's trace and line."""
        if self.tracer.finished:
            self._needed("arithmetic")
        out = TracedScalar(expr, self)
        self.tracer.scalars.append(weakref.ref(out))
        return out

    def _needed(self, what: str) -> NoReturn:
        if self.tracer.finished:
            raise CaptureError(
                f"{user_location()}: this number was read by .item() at {self.where} while "
                "staged.compile traced the step, and kept outside the step's results: it "
                "never has a value. Return it from the compiled function instead"
            )
        raise CaptureError(
            f"{user_location()}: {what} needs the number read by .item() at {self.where}, "
            "which has no value while staged.compile traces the step. A compiled step can "
            "return such a number (or arithmetic on it), and its calls give its value; to "
            "branch on it, print it or use it in a tensor op, move that code outside the "
            "compiled function, or keep the tensor (not its .item())"
        )

    def __repr__(self) -> str:
        return f"<the number .item() read at {self.where}, given by the compiled call>"

    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("sub"), _binary("sub", True)
    __mul__, __rmul__ = _binary("mul"), _binary("mul", True)
    __truediv__, __rtruediv__ = _binary("truediv"), _binary("truediv", True)
    __floordiv__, __rfloordiv__ = _binary("floordiv"), _binary("floordiv", True)
    __mod__, __rmod__ = _binary("mod"), _binary("mod", True)
    __pow__, __rpow__ = _binary("pow"), _binary("pow", True)
    __neg__, __pos__, __abs__ = _unary("neg"), _unary("pos"), _unary("abs")
    __floor__, __ceil__, __trunc__ = _unary("floor"), _unary("ceil"), _unary("trunc")

    def __round__(self, ndigits=None):
        return self._made(("round", self.expr, ("const", ndigits)))

    def __eq__(self, other):
        if other is self:
            return True
        self._needed("comparing it (==)")

    def __ne__(self, other):
        if other is self:
            return False
        self._needed("comparing it (!=)")

    __hash__ = object.__hash__
    __lt__, __le__ = _needs("comparing it (<)"), _needs("comparing it (<=)")
    __gt__, __ge__ = _needs("comparing it (>)"), _needs("comparing it (>=)")
    __bool__ = _needs("a Python branch on it (bool)")
    __float__, __int__ = _needs("float()"), _needs("int()")
    __complex__, __index__ = _needs("complex()"), _needs("using it as an index or size")
    __str__, __format__ = _needs("printing it (str)"), _needs("formatting it")
    __array__ = _needs("NumPy (or a tensor op)")


def results(out_leaves, res) -> list:
    """A call's result leaves (``Captured.out_leaves``, a saved step's ``out_leaves``) from
    its outputs ``res``: tensors, the numbers of traced scalars read from theirs as eager
    reads them, and the Python values the trace returned."""
    return [
        Tensor._wrap(res[x])
        if kind == "value"
        else evaluate(x, lambda k: Tensor._wrap(res[k]).item())
        if kind == "item"
        else x
        for kind, x in out_leaves
    ]
