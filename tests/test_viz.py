"""staged.viz: the eager autograd graph (make_dot, as torchviz) and a compiled step's
graph (Compiled.graph), checked in their DOT text and, where Graphviz's `dot` exists, in
the SVG it draws."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET

import pytest

import staged
from staged import nn, optim, viz
from staged.eager import interceptor

pytest.importorskip("graphviz", reason="staged.viz needs the graphviz package (the viz extra)")
needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="Graphviz's `dot` program is not installed (Debian "
    "package graphviz; `make test` installs it as root)",
)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.fc2 = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def edges(source: str) -> int:
    return sum("->" in line for line in source.splitlines())


def svg_texts(svg: str) -> list:
    root = ET.fromstring(svg)  # parses as XML
    return [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]


def test_make_dot_draws_nodes_leaves_and_saved_shapes():
    w = staged.ones(3, requires_grad=True)
    x = staged.randn(3)
    y = (w * x).sum()  # SumBackward0 <- MulBackward0 <- AccumulateGrad <- w
    src = viz.make_dot(y, params={"w": w}).source
    for label in ("SumBackward0", "MulBackward0", "AccumulateGrad", 'label="w\n (3)"'):
        assert label in src
    assert edges(src) == 4  # y's node, Sum, Mul, AccumulateGrad, w: a chain
    saved = viz.make_dot(y, params={"w": w}, show_saved=True).source
    assert edges(saved) == 5  # Mul saved x (w's gradient needs it), as `other`
    assert 'label="other\n(3)" fillcolor=orange' in saved


def test_make_dot_names_parameters_and_shows_attributes():
    net = Net()
    out = net(staged.randn(5, 3))
    dot = viz.make_dot(out.sum(), params=dict(net.named_parameters()), show_attrs=True)
    src = dot.source
    for name, shape in (
        ("fc1.weight", "(4, 3)"),
        ("fc1.bias", "(4)"),
        ("fc2.weight", "(2, 4)"),
        ("fc2.bias", "(2)"),
    ):
        assert f'label="{name}\n {shape}" fillcolor=lightblue' in src
    assert src.count("label=AccumulateGrad") == 4
    assert "ReluBackward0" in src and "AddmmBackward0" in src  # torch's Linear node
    assert "dims: (0, 1)" in src  # show_attrs: a Node's static parameters (the sum's)
    assert src.count("fillcolor=darkolivegreen1") == 1


def test_make_dot_of_several_outputs_draws_shared_nodes_once():
    a = staged.randn(2, 2, requires_grad=True)
    b = a.exp()
    src = viz.make_dot([b.sum(), (b * 3).sum()], params={"a": a}).source
    assert src.count("label=ExpBackward0") == 1
    assert src.count("fillcolor=darkolivegreen1") == 2
    # into each output from its Sum, into the Sums from Exp and Mul, into Mul from Exp,
    # into Exp from AccumulateGrad, into that from a
    assert edges(src) == 2 + 2 + 1 + 1 + 1


@needs_dot
def test_make_dot_renders_svg():
    net = Net()
    loss = (net(staged.randn(5, 3)) * 2).mean()
    svg = viz.render(viz.make_dot(loss, params=dict(net.named_parameters()), show_saved=True))
    texts = svg_texts(svg)
    for label in ("MulBackward0", "AccumulateGrad", "fc1.weight", "mat1", "(5, 4)"):
        assert label in texts


def double_output(module, args, out):  # a forward hook: its ops are marked in the step
    return out * 2


@pytest.fixture(scope="module")
def sgd_step():
    net = Net()
    opt = optim.SGD(net.parameters(), lr=0.1)
    net.fc2.register_forward_hook(double_output)

    @staged.compile
    def step(x, y):
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    with pytest.raises(RuntimeError, match="call the compiled step once"):
        step.graph(format="dot")
    step(staged.randn(8, 3), staged.randn(8, 2))
    return step


def test_compiled_step_graph_colours_phases(sgd_step):
    g = sgd_step._last.captured.graph
    phases = [op.phase for op in g.ops]
    assert {"forward", "backward", "optimizer"} <= set(phases)
    # forward until backward starts, the optimizer's update last (its lr input aside)
    assert phases.index("backward") > max(i for i, p in enumerate(phases) if p == "forward")
    src = sgd_step.graph(format="dot")
    for phase, color in viz.PHASE_COLORS.items():
        assert f"subgraph cluster_{phase}" in src
        assert src.count(f"fillcolor={color}") == phases.count(phase)
    assert edges(src) == sum(len(op.inputs) for op in g.ops) + len(g.outputs)
    assert 'label="matmul\nfloat32[8,4]"' in src
    assert 'label="arg x\nfloat32[8,3]"' in src
    assert "step: " in src and f"{len(g.ops)} ops" in src


def test_compiled_step_graph_marks_hook_ops(sgd_step):
    g = sgd_step._last.captured.graph
    hooked = [op for op in g.ops if op.hook]
    assert hooked and all(op.hook == "double_output" and op.phase == "forward" for op in hooked)
    src = sgd_step.graph(format="dot")
    assert src.count("hook double_output") == len(hooked)
    assert src.count(f"color={viz.HOOK_COLOR}") == len(hooked)


def test_tensor_hooks_in_backward_are_marked():
    w = staged.ones(3, requires_grad=True)

    def halve(g):
        return g / 2

    w.register_hook(halve)
    traced = staged.capture(lambda x: (w * x).sum().backward(), staged.randn(3))
    hooked = [op for op in traced.graph.ops if op.hook]
    assert "div" in [op.prim.name for op in hooked]  # (and the 2 expanded to its shape)
    assert all(op.phase == "backward" and op.hook.endswith("halve") for op in hooked)
    assert interceptor.tags.phase == "forward" and interceptor.tags.hook == ""


@needs_dot
def test_compiled_step_renders_svg(sgd_step):
    texts = svg_texts(sgd_step.graph())
    for label in (
        "forward",
        "backward",
        "optimizer",
        "matmul",
        "float32[8,4]",
        "hook double_output",
    ):
        assert label in texts
    assert sgd_step.graph(format="png").startswith(b"\x89PNG")


def test_missing_dot_says_which_package(sgd_step, monkeypatch):
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="apt-get install graphviz"):
        sgd_step.graph(format="svg")
    assert sgd_step.graph(format="dot").startswith("digraph step {")
