"""The results of a compiled training step that require grad (Note [graphless results]).

Note [graphless results]: eagerly, a tensor a training step returns (the loss, the
model's output, a prediction made after ``opt.step()``) requires grad and holds its graph:
a later backward through the loss or the output raises torch's freed-graph error (the
step's own backward freed what they saved), one through the prediction adds to the
parameters' ``.grad``. A compiled step that runs a backward returns values: its module
keeps no graph a later backward could go through (Note [autograd boundary] differentiates
only calls that run none). Returning them with ``requires_grad=False`` would make a loss
that mixes one with another term silently leave its share out, so each comes back as
eager gives it, ``requires_grad=True`` and not a leaf, with a ``grad_fn`` of its own,
``GraphlessResult``, whose backward raises: the freed-graph error where eager's would
(``tracing.returned.consumed`` decides at the trace), else one saying that the result
carries no graph and what to do instead. Its edges go to the call's tensors that require
grad (the parameters and arguments), so ``backward(inputs=...)`` and ``autograd.grad``
through it raise too. As in torch, ``.numpy()`` on it raises ("Use
tensor.detach().numpy() instead"); ``.item()``, ``.tolist()``, ``float()`` and printing
read it. Results eager gives without requires_grad (under ``no_grad``, detached, integer)
come back without it, and results that alias state keep their eager graph (Note
[returned state]). A deployed step (``runtime/deploy.py``) holds none of the caller's
tensors and its results depend on none: they are values, ``requires_grad=False``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._where import at_user
from ..autograd.node import Node
from ..autograd.saved import FREED_MESSAGE
from ..eager.tensor import Tensor

NO_GRAPH = (
    "staged.compile: this result of a compiled training step (one that runs a backward) "
    "requires grad but carries no autograd graph: eagerly a backward through it would reach "
    "the parameters, compiled it holds values only. Compute the term inside the step, call "
    "the step uncompiled, or .detach() the result to use it as a constant"
)


class GraphlessResult(Node):
    """The ``grad_fn`` of such a result: differentiating it raises ``message``. Its edges
    are made when the engine first reads them: an ``AccumulateGrad`` per parameter at
    every call would cost more than the call (6 us each)."""

    __slots__ = ("message", "_to", "_edges")
    _to: Sequence[Tensor]
    _edges: tuple | None

    def __init__(self, to: Sequence[Tensor], message: str):
        super().__init__(None)
        self._to, self.message = to, message

    @property  # type: ignore[override]
    def next_functions(self) -> tuple:
        if self._edges is None:
            self._edges = tuple(
                (t.grad_fn, t._output_nr) if t.grad_fn is not None else (t._grad_accumulator(), 0)
                for t in self._to
                if t._requires_grad
            )
            self._to = ()
        return self._edges

    @next_functions.setter
    def next_functions(self, edges) -> None:
        self._edges = edges

    def apply(self, grads):
        raise RuntimeError(at_user(self.message))


def graphless(value, freed: bool, to: list) -> Tensor:
    """A result of ``value`` that requires grad, with edges to the tensors ``to`` that
    require grad, whose backward raises torch's freed-graph error (``freed``) or says that
    it carries no graph."""
    t = Tensor._wrap(value, True)
    t.grad_fn = GraphlessResult(to, FREED_MESSAGE if freed else NO_GRAPH)
    return t
