"""A Module's parameters/buffers guard (``Module._state_objects``: names, then serials, in
one flat tuple) and tensors as dict keys (``Tensor.__hash__``, by identity as torch's)."""

from __future__ import annotations

import re

import numpy as np
import torch

import staged
from staged import nn, optim

X = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)


def test_a_buffer_replaced_in_place_of_another_re_traces_and_reads_the_new_one():
    m, ref = nn.BatchNorm1d(3).eval(), torch.nn.BatchNorm1d(3).eval()
    f = staged.compile(lambda x: m(x).detach())
    x = staged.tensor(X)
    f(x), f(x)
    assert f.traces == 1
    mean = np.array([0.5, -1.0, 2.0], np.float32)
    m.running_mean = staged.tensor(mean)
    ref.running_mean = torch.tensor(mean)
    np.testing.assert_allclose(f(x).numpy(), ref(torch.tensor(X)).detach().numpy(), rtol=1e-5)
    assert f.traces == 2
    assert re.fullmatch(
        r"BatchNorm1d parameters/buffers: bias#(\d+), num_batches_tracked#(\d+), "
        r"running_mean#(\d+), running_var#(\d+), weight#(\d+) -> bias#\1, "
        r"num_batches_tracked#\2, running_mean#(?!\3\b)\d+, running_var#\4, weight#\5",
        f.last_retrace_reason,
    )


def test_a_none_parameter_set_to_a_tensor_re_traces():
    m = nn.Linear(3, 2, bias=False)
    ref = torch.nn.Linear(3, 2, bias=False)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(m.weight.detach().numpy()))
    f = staged.compile(lambda x: m(x).detach())
    x = staged.tensor(X)
    f(x), f(x)
    m.bias = nn.Parameter(staged.ones(2))
    ref.bias = torch.nn.Parameter(torch.ones(2))
    np.testing.assert_allclose(f(x).numpy(), ref(torch.tensor(X)).detach().numpy(), rtol=1e-5)
    assert f.traces == 2
    assert re.fullmatch(
        r"Linear parameters/buffers: bias#None, weight#(\d+) -> bias#\d+, weight#\1",
        f.last_retrace_reason,
    )


def test_tensors_are_dict_keys_by_identity_as_torch_s():
    for lib in (staged, torch):
        a, b = lib.ones(2), lib.ones(2)
        d = {a: "a", b: "b"}
        assert (d[a], d[b], len({a, b, a}), hash(a) == hash(a)) == ("a", "b", 2, True)


def test_a_replaced_momentum_buffer_re_traces_the_optimizer_state_guard():
    m = nn.Linear(3, 2)
    opt = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    @staged.compile
    def step(x):
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()

    x = staged.tensor(X)
    for _ in range(3):
        step(x)
    traces = step.traces
    opt.state[m.weight]["momentum_buffer"] = staged.zeros(2, 3)
    step(x)
    assert step.traces == traces + 1
    assert step.last_retrace_reason == (
        "optimizer state: as traced -> entries added, removed or replaced"
    )
