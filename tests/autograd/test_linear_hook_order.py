"""The order in which a backward through ``nn.Linear`` runs its parameters' hooks, against
torch 2.13: torch's AddmmBackward0 has the edges (bias, input, weight.t()), so the bias's
tensor and post-accumulate-grad hooks fire before the input's and the weight's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged

CASES = {  # input shape, bias, layers
    "2d_input_addmm": ((4, 3), True, 1),
    "3d_input": ((2, 4, 3), True, 1),
    "no_bias": ((4, 3), False, 1),
    "two_stacked_linears": ((4, 3), True, 2),
}


def _layers(lib, bias, depth):
    rng = np.random.default_rng(0)
    layers = []
    for i in range(depth):
        layer = lib.nn.Linear(3 if i == 0 else 2, 2, bias=bias).double()
        with lib.no_grad():
            for p in layer.parameters():
                p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape))))
        layers.append(layer)
    return layers


def _hooked(lib, layers, fired):
    for i, layer in enumerate(layers, 1):
        for name, p in layer.named_parameters():
            tag = f"l{i}.{name}"
            p.register_hook(lambda g, tag=tag: fired.append(f"hook {tag}"))
            p.register_post_accumulate_grad_hook(lambda p, tag=tag: fired.append(f"post {tag}"))


def _run(lib, case, hook_input=False):
    shape, bias, depth = CASES[case]
    fired = []
    layers = _layers(lib, bias, depth)
    _hooked(lib, layers, fired)
    x = lib.tensor(np.linspace(-1, 1, np.prod(shape)).reshape(shape), requires_grad=hook_input)
    if hook_input:
        x.register_hook(lambda g: fired.append("hook x"))
    out = x
    for layer in layers:
        out = layer(out)
    if hook_input:
        out.retain_grad()
        out.register_hook(lambda g: fired.append("hook out"))
    out.sum().backward()
    grads = [p.grad.detach().numpy() for layer in layers for p in layer.parameters()]
    return fired, grads, out


@pytest.mark.parametrize("case", list(CASES))
def test_hooks_fire_in_torchs_order(case):
    fired, grads, _ = _run(staged, case)
    want, want_grads, _ = _run(torch, case)
    assert fired == want
    if CASES[case][1]:  # the last layer's bias first
        last = CASES[case][2]
        assert fired[:2] == [f"hook l{last}.bias", f"post l{last}.bias"]
    for g, w in zip(grads, want_grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_input_hook_and_retain_grad_fire_between_bias_and_weight_as_torch():
    fired, _, out = _run(staged, "2d_input_addmm", hook_input=True)
    want, _, tout = _run(torch, "2d_input_addmm", hook_input=True)
    assert (
        fired
        == want
        == [
            "hook out",
            "hook l1.bias",
            "post l1.bias",
            "hook x",
            "hook l1.weight",
            "post l1.weight",
        ]
    )
    np.testing.assert_array_equal(out.grad.numpy(), tout.grad.numpy())


def test_linear_node_name_and_edges_bias_first_as_torch():
    (layer,) = _layers(staged, True, 1)
    (tlayer,) = _layers(torch, True, 1)
    x = np.ones((4, 3))
    fn, tfn = layer(staged.tensor(x)).grad_fn, tlayer(torch.tensor(x)).grad_fn
    assert fn.name() == tfn.name() == "AddmmBackward0"
    assert fn.next_functions[0][0].variable is layer.bias
    assert tfn.next_functions[0][0].variable is tlayer.bias
    assert fn.next_functions[1] == (None, 0) and tfn.next_functions[1] == (None, 0)
    (w_fn, _), (tw_fn, _) = fn.next_functions[2], tfn.next_functions[2]
    assert w_fn.variable is layer.weight  # torch's reaches it through TBackward0
    assert tw_fn.next_functions[0][0].variable is tlayer.weight


def test_a_post_accumulate_grad_hook_that_returns_a_value_raises_as_torch():
    """``lambda t: t.grad.mul_(0.5)`` returns the gradient: torch refuses it in backward
    (after the hook ran), staged too, where it was accepted."""
    seen = {}
    for lib in (staged, torch):
        p = lib.nn.Parameter(lib.ones(2))
        p.register_post_accumulate_grad_hook(lambda t: t.grad.mul_(0.5))
        with pytest.raises(RuntimeError, match="post accumulate grad hooks should return None"):
            (p * 3).sum().backward()
        seen[lib] = p.grad.tolist()
    assert seen[staged] == seen[torch]
