"""``autograd.grad``/``backward`` with GradientEdges (``autograd.graph.get_gradient_edge``)
as outputs and as inputs, and the other forms torch 2.13 takes ``inputs`` in (a dict gives
a dict back, an iterable a tuple, another Mapping a TypeError): values and errors against
torch."""

from __future__ import annotations

import collections
import types

import numpy as np
import pytest
import torch

import staged
from tests.checks import raises_like_torch, to_numpy


def _graph(lib):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
    h = x * w
    return x, w, h, (h**2).sum()


def _edge(lib, t):
    return lib.autograd.graph.get_gradient_edge(t)


def _same(fn):
    """``fn(lib, x, w, h, y)`` gives torch's gradients (a tuple or a dict) under staged."""
    want, got = fn(torch, *_graph(torch)), fn(staged, *_graph(staged))
    assert type(got) is type(want)
    if isinstance(want, dict):
        assert list(got) == list(want)
        want, got = list(want.values()), list(got.values())
    assert len(got) == len(want)
    for g, t in zip(got, want):
        assert (g is None) == (t is None)
        if t is not None:
            np.testing.assert_allclose(to_numpy(g), to_numpy(t), rtol=1e-6)


CASES = {
    "edge_input_of_a_non_leaf": lambda lib, x, w, h, y: lib.autograd.grad(y, _edge(lib, h)),
    "edge_input_of_a_leaf": lambda lib, x, w, h, y: lib.autograd.grad(y, _edge(lib, x)),
    "edges_and_tensors": lambda lib, x, w, h, y: lib.autograd.grad(y, [_edge(lib, x), w]),
    "edge_output": lambda lib, x, w, h, y: lib.autograd.grad(
        _edge(lib, h), x, grad_outputs=lib.tensor([1.0, 2.0, 3.0])
    ),
    "scalar_edge_output": lambda lib, x, w, h, y: lib.autograd.grad(_edge(lib, y), (x, w)),
    "edge_and_tensor_outputs": lambda lib, x, w, h, y: lib.autograd.grad(
        [_edge(lib, h), y], [x], grad_outputs=[lib.ones(3), None]
    ),
    "edge_to_edge": lambda lib, x, w, h, y: lib.autograd.grad(
        _edge(lib, h), _edge(lib, x), lib.ones(3)
    ),
    "dict_inputs": lambda lib, x, w, h, y: lib.autograd.grad(y, {"x": x, "w": w}),
    "dict_inputs_unused": lambda lib, x, w, h, y: lib.autograd.grad(
        y, {"z": lib.ones(1, requires_grad=True), "x": x}, materialize_grads=True
    ),
    "dict_inputs_batched": lambda lib, x, w, h, y: lib.autograd.grad(
        h, {"w": w}, grad_outputs=lib.eye(3), is_grads_batched=True
    ),
    "edge_output_batched": lambda lib, x, w, h, y: lib.autograd.grad(
        _edge(lib, h), {"x": x}, grad_outputs=lib.eye(3), is_grads_batched=True
    ),
    "generator_inputs": lambda lib, x, w, h, y: lib.autograd.grad(y, (t for t in (w, x))),
    "generator_outputs": lambda lib, x, w, h, y: lib.autograd.grad((o for o in [y]), x),
    "unused_edge_allowed": lambda lib, x, w, h, y: lib.autograd.grad(
        y, [x, _edge(lib, lib.ones(1, requires_grad=True) * 2)], allow_unused=True
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_grad_is_torchs(name):
    _same(CASES[name])


def _backward(tensors, inputs, grad_tensors=None):
    def fn(lib, x, w, h, y):
        lib.autograd.backward(tensors(lib, h, y), grad_tensors, inputs=inputs(lib, x, w))
        return x.grad, w.grad

    return fn


BACKWARD = {
    "dict": _backward(lambda lib, h, y: y, lambda lib, x, w: {"x": x}),
    "edge": _backward(lambda lib, h, y: y, lambda lib, x, w: _edge(lib, w)),
    "edges": _backward(lambda lib, h, y: [y], lambda lib, x, w: [_edge(lib, x), w]),
    "generator": _backward(lambda lib, h, y: y, lambda lib, x, w: (t for t in [w])),
    "edge_tensors": _backward(lambda lib, h, y: _edge(lib, y), lambda lib, x, w: [x]),
}


@pytest.mark.parametrize("name", list(BACKWARD))
def test_backward_is_torchs(name):
    _same(BACKWARD[name])


def test_tensor_backward_takes_a_dict_of_inputs():
    _same(lambda lib, x, w, h, y: (y.backward(inputs={"w": w}), x.grad, w.grad)[1:])


def test_an_edge_output_takes_its_tensors_shape_and_dtype():
    def fn(lib):
        x, w, h, y = _graph(lib)
        lib.autograd.grad(_edge(lib, h), x, grad_outputs=lib.ones(2))

    raises_like_torch(fn, "Mismatch in shape: grad_output[0] has a shape of", "Size([3])")


ERRORS = {
    "edge_output_not_scalar": (
        lambda lib, x, w, h, y: lib.autograd.grad(_edge(lib, h), x),
        ["grad can be implicitly created only for scalar outputs"],
    ),
    "edge_output_complex_cotangent": (
        lambda lib, x, w, h, y: lib.autograd.grad(
            _edge(lib, h), x, grad_outputs=lib.ones(3, dtype=lib.complex64)
        ),
        ["For complex Tensors, both grad_output and output", "grad_output[0] has a dtype of"],
    ),
    "complex_output_without_cotangent": (
        lambda lib, x, w, h, y: lib.autograd.grad((y * (1 + 1j)), x),
        ["grad can be implicitly created only for real scalar outputs but got", "complex64"],
    ),
    "materialize_an_unused_edge": (
        lambda lib, x, w, h, y: lib.autograd.grad(
            y, [x, _edge(lib, lib.ones(1, requires_grad=True) * 2)], materialize_grads=True
        ),
        ["materialize_grads cannot be used when the given input is a GradientEdge"],
    ),
    "unused_edge": (
        lambda lib, x, w, h, y: lib.autograd.grad(
            y, [x, _edge(lib, lib.ones(1, requires_grad=True) * 2)]
        ),
        ["The differentiated Tensor at index 1 appears to not have been used"],
    ),
    "edge_output_batched_wrong_shape": (
        lambda lib, x, w, h, y: lib.autograd.grad(
            _edge(lib, h), x, grad_outputs=lib.ones(2, 2), is_grads_batched=True
        ),
        ["Batched grads are not supported with GradientEdge"],
    ),
    "ordered_dict": (
        lambda lib, x, w, h, y: lib.autograd.grad(y, collections.OrderedDict(x=x)),
        ["`inputs` argument to `grad()` must be a dict, not OrderedDict. Other Mapping"],
    ),
    "mappingproxy": (
        lambda lib, x, w, h, y: lib.autograd.grad(y, types.MappingProxyType({"x": x})),
        ["must be a dict, not mappingproxy"],
    ),
    "backward_ordered_dict": (
        lambda lib, x, w, h, y: y.backward(inputs=collections.OrderedDict(x=x)),
        ["`inputs` argument to `backward()` must be a dict, not OrderedDict"],
    ),
    "empty_dict": (
        lambda lib, x, w, h, y: lib.autograd.grad(y, {}),
        ["`inputs` argument to `grad()` cannot be empty."],
    ),
    "backward_empty": (
        lambda lib, x, w, h, y: y.backward(inputs=[]),
        ["`inputs` argument to `backward()` cannot be empty."],
    ),
    "a_number_input": (
        lambda lib, x, w, h, y: lib.autograd.grad(y, [x, 1.0]),
        ["all inputs have to be Tensors or GradientEdges, but got float"],
    ),
    "a_string_input": (
        lambda lib, x, w, h, y: lib.autograd.grad(y, "ab"),
        ["all inputs have to be Tensors or GradientEdges, but got str"],
    ),
    "edge_of_a_tensor_without_grad": (
        lambda lib, x, w, h, y: _edge(lib, lib.ones(2)),
        ["It is not possible to get the gradient edge for a Tensor that does not require"],
    ),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_torchs(name):
    fn, words = ERRORS[name]
    raises_like_torch(lambda lib: fn(lib, *_graph(lib)), *words)


def test_only_inputs_is_ignored_with_torchs_warning():
    x, w, h, y = _graph(staged)
    with pytest.warns(FutureWarning, match="only_inputs argument is deprecated"):
        (g,) = staged.autograd.grad(y, x, only_inputs=False)
    assert x.grad is None and w.grad is None
    np.testing.assert_allclose(to_numpy(g), [0.5, 4.0, 24.0])


def test_an_edge_is_torchs_named_tuple():
    x, w, h, y = _graph(staged)
    edge = _edge(staged, h)
    assert edge._fields == torch.autograd.graph.GradientEdge._fields
    assert edge.node is h.grad_fn and edge.output_nr == 0 and edge.ownership_token is None
    leaf = _edge(staged, x)
    assert leaf.node.name() == "torch::autograd::AccumulateGrad" and leaf.node.variable is x


def test_an_edge_made_by_hand_as_an_output_asks_for_get_gradient_edge():
    """staged's Nodes keep no metadata of their inputs (torch's do): an edge output made
    without ``get_gradient_edge`` has no shape to check or fill its cotangent with."""
    x, w, h, y = _graph(staged)
    edge = staged.autograd.graph.GradientEdge(y.grad_fn, 0)
    with pytest.raises(RuntimeError, match=r"make the edge with .*get_gradient_edge\(tensor\)"):
        staged.autograd.grad(edge, x)
    (g,) = staged.autograd.grad(y, staged.autograd.graph.GradientEdge(h.grad_fn, 0))
    np.testing.assert_allclose(to_numpy(g), 2 * to_numpy(h))  # as an input it needs none
