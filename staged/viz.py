"""Pictures of graphs, drawn with Graphviz.

``make_dot(tensor)`` draws the eager autograd graph behind a tensor, as torchviz does:
one box a backward Node (``MulBackward0``, ``AccumulateGrad``), leaves in blue with their
names from ``params`` and their shapes, the tensor itself in green, and with
``show_saved`` what each Node saved for backward, in orange. ``make_step_dot(graph)``
(``Compiled.graph()`` for a compiled step) draws a captured graph: one box an op, with its
shape and dtype, coloured by the phase of the step that issued it (forward, backward,
optimizer update: Note [phases] in staged/eager/interceptor.py), ops run by a user hook
outlined in red with the hook's name, inputs and outputs as ellipses.

Both return a ``graphviz.Digraph`` (the ``graphviz`` Python package: ``pip install
staged[viz]``), whose ``.source`` is the DOT text; ``render(dot, format)`` turns it into
an SVG (or PNG, PDF ...) with Graphviz's ``dot`` program (Debian's ``graphviz`` package).
"""

from __future__ import annotations

import shutil
from typing import Any

from .autograd.node import AccumulateGrad
from .eager.tensor import Tensor
from .tracing.ir import Graph

PHASE_COLORS = {"forward": "lightblue", "backward": "lightsalmon", "optimizer": "palegreen"}
HOOK_COLOR = "red"
NODE_ATTR = {
    "style": "filled",
    "shape": "box",
    "align": "left",
    "fontsize": "10",
    "ranksep": "0.1",
    "height": "0.2",
    "fontname": "monospace",
}


def _digraph(name: str, **graph_attr):
    try:
        import graphviz
    except ImportError:
        raise ImportError(
            "staged.viz draws with the graphviz Python package, which is not "
            "installed: pip install graphviz (or staged[viz])"
        ) from None
    return graphviz.Digraph(name, node_attr=NODE_ATTR, graph_attr=graph_attr)


def _size(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


def make_dot(var, params=None, show_attrs=False, show_saved=False, max_attr_chars=50):
    """The autograd graph behind ``var`` (a tensor or a sequence of them), as
    ``torchviz.make_dot``: ``params`` names leaves (``dict(model.named_parameters())``),
    ``show_attrs`` adds each Node's static parameters, ``show_saved`` its saved tensors.

    Example:
        >>> loss = model(x).sum()
        >>> make_dot(loss, params=dict(model.named_parameters())).render("graph")
    """
    names = {id(v): k for k, v in (params or {}).items()}
    dot = _digraph("autograd")
    roots = [var] if isinstance(var, Tensor) else list(var)
    stack, seen = [], set()
    for t in roots:
        dot.node(str(id(t)), _size(t.shape), fillcolor="darkolivegreen1")
        if t.grad_fn is not None:
            dot.edge(str(id(t.grad_fn)), str(id(t)))
            stack.append(t.grad_fn)
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        label = fn.name().rpartition("::")[2]  # torchviz's: the class's name
        if show_attrs:
            label += "".join(
                f"\n{k}: {_short(v, max_attr_chars)}"
                for k, v in (getattr(fn, "params", None) or {}).items()
            )
        dot.node(str(id(fn)), label)
        if isinstance(fn, AccumulateGrad):
            v = fn.variable
            dot.node(
                str(id(v)), f"{names.get(id(v), '')}\n {_size(v.shape)}", fillcolor="lightblue"
            )
            dot.edge(str(id(v)), str(id(fn)))
        if show_saved:
            for name, s in _saved(fn):
                dot.node(str(id(s)), f"{name}\n{_saved_shape(s)}", fillcolor="orange")
                dot.edge(str(id(s)), str(id(fn)), dir="none")
        for nxt, _ in fn.next_functions:
            if nxt is not None:
                dot.edge(str(id(nxt)), str(id(fn)))
                stack.append(nxt)
    return dot


# nodes whose torch names for their saved inputs are not self/other (AddmmBackward0's)
_TORCH_SAVED = {"linear": {"x": "mat1", "weight": "mat2"}}


def _saved(fn) -> list:
    """``[(name, SavedTensor)]`` of a Node, named as PyTorch's ``_saved_<name>``."""
    saved = getattr(fn, "saved", None)  # PrimitiveBackward: {input name: SavedTensor}
    if isinstance(saved, dict):
        names = fn.prim.inputs
        alias = {"out": "result", names[0]: "self"}
        if len(names) > 1:
            alias[names[-1]] = "other"
        alias.update(_TORCH_SAVED.get(fn.prim.name, {}))
        return [(alias.get(k, k), s) for k, s in saved.items()]
    saved = getattr(fn, "_saved", None)  # a custom Function's ctx.saved_tensors
    return [(f"saved_tensors[{i}]", s) for i, s in enumerate(saved or ()) if s is not None]


def _saved_shape(s) -> str:
    if s._freed:
        return "(freed)"
    t = s._tensor if s._tensor is not None else s._payload
    return "(packed by a hook)" if t is None else _size(t.shape)


def _short(v, n: int) -> str:
    text = str(getattr(v, "name", None) or v)
    return text if len(text) <= n else text[: n - 3] + "..."


def make_step_dot(graph: Graph, title: str = ""):
    """A captured graph (``staged.capture(...).graph``; ``Compiled.graph()`` for a
    compiled step): each op a box labelled with its primitive, shape and dtype, in a
    cluster and colour per phase (``PHASE_COLORS``); ops from a hook outlined in red."""
    phases: dict[Any, list] = {}
    for op in graph.ops:
        phases.setdefault(op.phase, []).append(op)
    counts = ", ".join(f"{p} {len(ops)}" for p, ops in phases.items())
    dot = _digraph(
        "step", rankdir="TB", label=f"{title}{len(graph.ops)} ops ({counts})", labelloc="t"
    )
    for i in graph.inputs:
        dot.node(
            f"v{i.value.id}",
            f"{i.kind} {i.name}\n{i.value.aval}",
            shape="ellipse",
            fillcolor="gold" if i.kind == "state" else "white",
        )
    for v, a in graph.consts:
        value = f" {a.item():g}" if a.size == 1 and a.dtype.kind in "biuf" else ""
        dot.node(f"v{v.id}", f"const{value}\n{v.aval}", fillcolor="gray90", fontsize="8")
    order = [p for p in PHASE_COLORS if p in phases] + [p for p in phases if p not in PHASE_COLORS]
    for phase in order:
        with dot.subgraph(name=f"cluster_{phase}") as c:
            c.attr(label=phase, style="rounded", color=PHASE_COLORS.get(phase, "gray"))
            for op in phases[phase]:
                hook = (
                    {"color": HOOK_COLOR, "penwidth": "2", "style": "filled,dashed"}
                    if op.hook
                    else {}
                )
                c.node(
                    f"v{op.out.id}",
                    f"{op.prim.name}\n{op.out.aval}" + (f"\nhook {op.hook}" if op.hook else ""),
                    fillcolor=PHASE_COLORS.get(phase, "white"),
                    tooltip=f"%{op.out.id} ({phase}) {op.loc}",
                    **hook,
                )
    for op in graph.ops:
        for v in op.inputs:
            dot.edge(f"v{v.id}", f"v{op.out.id}")
    for k, o in enumerate(graph.outputs):
        dot.node(
            f"out{k}",
            f"{o.kind} {o.name}\n{o.value.aval}",
            shape="ellipse",
            fillcolor="darkolivegreen1",
        )
        dot.edge(f"v{o.value.id}", f"out{k}")
    return dot


def render(dot, format: str = "svg"):
    """``dot``'s DOT text (``format="dot"``), or the picture Graphviz's ``dot`` program
    draws of it: text for ``"svg"``, bytes for other formats (``"png"``, ``"pdf"``)."""
    if format in ("dot", "gv"):
        return dot.source
    if shutil.which("dot") is None:
        raise RuntimeError(
            f"rendering a graph as {format} needs Graphviz's `dot` program, "
            "which is not on PATH: install Graphviz (Debian/Ubuntu: apt-get "
            "install graphviz; macOS: brew install graphviz), or pass "
            "format='dot' for the DOT text"
        )
    out = dot.pipe(format=format)
    return out.decode() if format == "svg" else out
