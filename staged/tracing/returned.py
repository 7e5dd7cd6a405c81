"""Results of a trace that are tensors from before it, or aliases of one.

Note [returned state]: eager code that returns a parameter (``return loss, m[0].bias``),
its ``detach()`` or ``.data``, a view of it (``m[0].weight[0]``) or an optimizer buffer
hands back that tensor itself, or an alias of its memory, which later steps go on
updating in place (and a write through an alias reaches the parameter). A compiled step
returns the same: capture records each such result as a recipe, ``(kind, root, ops)``,
the tensor it aliases and how to remake the alias from it, and the compiled call, once it
has written the state back, returns the root itself or ``rebuild(root, ops)``, with the
grad_fn and requires_grad eager gives it. ``kind`` says what ``root`` is: ``"state"`` (a
``Watched``, whose tensor is the current one: Note [grads by owner]), ``"escaped"`` (a
tensor the body stored, an optimizer's new buffer), ``"grad"`` (a tensor whose new
``.grad`` it is) or ``"arg"`` (the index of an argument leaf; its detaches only: a view
of an argument could follow the batch). A result that requires grad from a step that
runs no backward stays the call's Node's (Note [autograd boundary]), unless it is the
tensor itself. The graph still returns the value too: a deployed step, which holds no
caller's tensors, returns that (its state at the end of the call). A result that requires
grad from a step that runs a backward comes back without its graph (Note [graphless
results] in runtime/graphless.py); ``consumed`` says which error differentiating it raises.
"""

from __future__ import annotations

from ..autograd.function import BackwardCFunction
from ..autograd.node import PrimitiveBackward
from ..eager.grad_mode import set_grad_enabled
from ..eager.tensor import Tensor
from ..eager.views import replay


def recipe(t: Tensor, start: int) -> tuple | None:
    """``(root, ops)`` where ``t`` (a result of the trace) is ``root``, a tensor from
    before the trace (made before serial ``start``), or an alias or view of it remade by
    ``rebuild(root, ops)``; None where ``t`` holds data of its own."""
    ops: list[tuple] = []
    while t._serial >= start:
        base = t._base
        if base is not None:
            view = t._view
            if view is None or base._vc is not t._vc:
                return None
            steps = tuple((prim, params) for prim, params, _ in view.steps)
            ops.append(("view", view.grad_mode, steps))
            t = base
            continue
        root = getattr(t, "_alias", None)
        if root is None or root._payload is not t._payload:
            return None  # its own memory, or replaced since (t.data = u)
        ops.append(("detach",) if t._vc is root._vc else ("data",))
        t = root
    return t, tuple(reversed(ops))


def rebuild(x: Tensor, ops: tuple) -> Tensor:
    """The alias ``ops`` (of ``recipe``) make of ``x`` now, as the traced code made it."""
    for op in ops:
        if op[0] == "view":
            with set_grad_enabled(op[1]):
                x = replay(x, [(prim, params, None) for prim, params in op[2]])
        else:
            x = x.detach() if op[0] == "detach" else x.data
    return x


def same_recipe(a: tuple | None, b: tuple | None) -> bool:
    """Whether two traces' recipes of a result remake the same alias (``dynamic=True``
    keeps only those its traces at two batch sizes agree on)."""
    if a is None or b is None:
        return a is b
    (kind, x, ops), (kind_b, y, ops_b) = a, b
    if kind != kind_b or ops != ops_b:
        return False
    return x.tensor is y.tensor if kind == "state" else x == y if kind == "arg" else x is y


def consumed(t: Tensor) -> bool:
    """Whether a backward without ``retain_graph`` freed what ``t``'s graph saved: a
    backward through ``t`` then raises torch's freed-graph error eagerly."""
    seen, todo = set(), [t.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        saved = (
            node.saved.values()
            if isinstance(node, PrimitiveBackward)
            else node._saved or ()
            if isinstance(node, BackwardCFunction)
            else ()
        )
        if any(s is not None and s._freed for s in saved):
            return True
        todo.extend(fn for fn, _ in node.next_functions)
    return False
