"""staged.utils.checkpoint against torch.utils.checkpoint (torch 2.13): gradients, dropout
replayed from the RNG state, recompute counts, nesting, errors; and under capture."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from iree.compiler.tools import compile_str

import staged
from staged.runtime.compiler import flags
from tests.checks import assert_close, raises_like_torch

X = np.random.default_rng(1).standard_normal((4, 5))
W = np.random.default_rng(2).standard_normal((5, 5))


def leaves(lib):
    return (lib.tensor(X, requires_grad=True), lib.tensor(W, requires_grad=True))


def block(lib, calls=None, p=0.0):
    """A small region saving several tensors (matmul, tanh, softmax, dropout)."""

    def fn(x, w, scale=1.0):
        if calls is not None:
            calls.append(1)
        h = lib.nn.functional.dropout((x @ w).tanh(), p, True)
        return lib.softmax(h * scale, -1) * h

    return fn


def ck(lib):
    return lib.utils.checkpoint


def run(lib, use_reentrant=False, p=0.0, checkpointed=True, **kw):
    """Gradients of a checkpointed (or plain) region, after seeding both libraries."""
    lib.manual_seed(7)
    x, w = leaves(lib)
    fn = block(lib, p=p)
    y = (
        ck(lib).checkpoint(fn, x, w, use_reentrant=use_reentrant, **kw)
        if checkpointed
        else fn(x, w)
    )
    (y * y).sum().backward()
    return y, x.grad, w.grad


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_gradients_equal_the_unchecked_run_and_torch(use_reentrant):
    ours, plain, theirs = (
        run(staged, use_reentrant),
        run(staged, checkpointed=False),
        run(torch, use_reentrant),
    )
    for a, b, c in zip(ours, plain, theirs):
        assert_close(a, b)
        assert_close(a, c, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("preserve", [True, False])
@pytest.mark.parametrize("use_reentrant", [False, True])
def test_dropout_is_torch_s_with_the_same_seed(use_reentrant, preserve):
    """The recompute replays the forward's mask (preserve_rng_state=True) or draws the
    next one (False), from torch's own stream either way."""
    ours = run(staged, use_reentrant, p=0.4, preserve_rng_state=preserve)
    theirs = run(torch, use_reentrant, p=0.4, preserve_rng_state=preserve)
    for a, b in zip(ours, theirs):
        assert_close(a, b, rtol=1e-12, atol=1e-12)
    plain = run(staged, p=0.4, checkpointed=False)
    assert np.allclose(ours[1].numpy(), plain[1].numpy()) == preserve


def test_autograd_grad_kwargs_and_non_tensor_outputs():
    def fn(lib):
        x, w = leaves(lib)

        def region(x, w, scale, tag):
            return {"y": block(lib)(x, w, scale), "tag": tag, "n": 3}

        out = ck(lib).checkpoint(region, x, w, use_reentrant=False, scale=2.0, tag="t")
        assert (out["tag"], out["n"]) == ("t", 3)
        return lib.autograd.grad(out["y"].sum(), (x, w))

    for a, b in zip(*(fn(lib) for lib in (staged, torch))):
        assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_recompute_once_per_backward_and_nested_counts_as_torch():
    def counts(lib):
        outer, inner = [], []
        x, w = leaves(lib)

        def region(x, w):
            h = (x * w[0]).sin()
            h = ck(lib).checkpoint(block(lib, inner), h, w, use_reentrant=False)
            return (h * x).cos()

        y = ck(lib).checkpoint(
            lambda *a: (outer.append(1), region(*a))[1], x, w, use_reentrant=False
        )
        seen = [(len(outer), len(inner))]
        y.sum().backward(retain_graph=True)
        seen.append((len(outer), len(inner)))
        y.sum().backward()
        seen.append((len(outer), len(inner)))
        return seen, x.grad, w.grad

    ours, theirs = counts(staged), counts(torch)
    # each backward reruns the outer region once; that rerun runs the inner checkpoint's
    # forward, and the inner one then recomputes once itself
    assert ours[0] == theirs[0] == [(1, 1), (2, 3), (3, 5)]
    for a, b in zip(ours[1:], theirs[1:]):
        assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_double_backward_through_checkpoint():
    def hvp(lib):
        x, w = leaves(lib)
        y = ck(lib).checkpoint(block(lib), x, w, use_reentrant=False)
        (gx,) = lib.autograd.grad((y * y).sum(), x, create_graph=True)
        return lib.autograd.grad(gx.sum(), w)[0]

    assert_close(hvp(staged), hvp(torch), rtol=1e-10, atol=1e-12)


def test_checkpoint_sequential_as_torch():
    def grads(lib):
        lib.manual_seed(3)
        model = lib.nn.Sequential(
            *[
                m
                for _ in range(3)
                for m in (lib.nn.Linear(5, 5).double(), lib.nn.Tanh(), lib.nn.Dropout(0.2))
            ]
        )
        x = lib.tensor(X, requires_grad=True)
        ck(lib).checkpoint_sequential(model, 3, x, use_reentrant=False).sum().backward()
        return [x.grad] + [p.grad for p in model.parameters()]

    for a, b in zip(grads(staged), grads(torch)):
        assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("which", ["checkpoint", "checkpoint_sequential"])
def test_warns_when_use_reentrant_is_not_passed(which):
    def call(lib):
        x = lib.tensor(X, requires_grad=True)
        if which == "checkpoint":
            return ck(lib).checkpoint(lambda t: t.sin(), x)
        return ck(lib).checkpoint_sequential([lambda t: t.sin()] * 2, 2, x)

    messages = []
    for lib in (staged, torch):
        with pytest.warns(UserWarning) as record:
            call(lib)
        messages.append(str(record[0].message))
    ours, theirs = messages
    assert ours.split(":", 1)[1] == theirs.split(":", 1)[1]
    assert ours.startswith(f"staged.utils.checkpoint{'' if which == 'checkpoint' else '.'}")


def _fn(lib, **kw):
    x, w = leaves(lib)
    return ck(lib).checkpoint(block(lib), x, w, **kw)


@pytest.mark.parametrize(
    "kw, fragment",
    [
        (dict(use_reentrant=True, scale=2.0), "Unexpected keyword arguments: scale"),
        (dict(use_reentrant=True, debug=True), "only supported when use_reentrant=False"),
        (dict(use_reentrant=False, determinism_check="all"), "determinism_check should be one of"),
    ],
)
def test_argument_errors(kw, fragment):
    raises_like_torch(lambda lib: _fn(lib, **kw), fragment)


def test_reentrant_errors():
    def with_grad(lib):
        x = lib.tensor(X, requires_grad=True)
        lib.autograd.grad(ck(lib).checkpoint(lambda t: t.sin(), x, use_reentrant=True).sum(), x)

    raises_like_torch(
        with_grad, "is incompatible with .grad() or passing an `inputs` parameter to .backward()"
    )

    def no_grad_output(lib):
        x = lib.tensor(X, requires_grad=True)
        y = ck(lib).checkpoint(lambda t: t.detach() + 1, x, use_reentrant=True)
        (y * x).sum().backward()

    raises_like_torch(no_grad_output, "none of output has requires_grad=True")


def _checkpoint_error(fn, fragment):
    """Both raise their CheckpointError (a RuntimeError) holding ``fragment``."""
    for lib in (staged, torch):
        with pytest.raises(ck(lib).CheckpointError, match=fragment) as e:
            fn(lib)
        assert isinstance(e.value, RuntimeError)


def test_nondeterministic_recompute_errors():
    def shapes(lib):
        n = iter([4, 3])
        x = lib.tensor(X, requires_grad=True)
        ck(lib).checkpoint(lambda t: t[: next(n)].sin(), x, use_reentrant=False).sum().backward()

    _checkpoint_error(
        shapes,
        "Recomputed values for the following tensors have different "
        "metadata than during the forward pass",
    )

    def count(lib):
        n = iter([2, 1])
        x = lib.tensor(X, requires_grad=True)

        def f(t):
            for _ in range(next(n)):
                t = t.sin()
            return t

        ck(lib).checkpoint(f, x, use_reentrant=False, early_stop=False).sum().backward()

    _checkpoint_error(
        count,
        "A different number of tensors was saved during the original forward and recomputation",
    )


def test_input_modified_in_place_after_the_forward():
    def fn(lib):
        x = lib.tensor(X, requires_grad=True)
        h = x * 1
        y = ck(lib).checkpoint(lambda t: t.sin(), h, use_reentrant=False)
        with lib.no_grad():
            h.add_(1)
        y.sum().backward()

    raises_like_torch(fn, "modified by an inplace operation")


def test_a_node_unpacks_each_saved_tensor_once():
    """What checkpoint relies on (its holders are emptied when unpacked): ``a / b`` saves
    ``b`` for both gradients and unpacks it once per backward, as torch."""

    def unpacks(lib):
        n = []
        a, b = (lib.tensor(X, requires_grad=True) for _ in range(2))
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: n.append(1) or t):
            y = a / b
        y.sum().backward()
        return len(n)

    assert unpacks(staged) == unpacks(torch) == 2


def test_forward_saves_only_the_inputs():
    """An outer saved-tensor hook sees the checkpoint's inputs, not its activations."""
    x, w = leaves(staged)
    saved = []
    with staged.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        staged.utils.checkpoint.checkpoint(block(staged), x, w, use_reentrant=False)
    assert [t is a for t, a in zip(saved, (x, w))] == [True, True]


def compiled_case(checkpointed, p=0.0, use_reentrant=False):
    """(a training step of ``block`` on a float32 weight, the weight), seeded."""
    staged.manual_seed(5)
    w = staged.tensor(W, dtype=staged.float32, requires_grad=True)
    region = block(staged, p=p)

    def step(x):
        y = (
            staged.utils.checkpoint.checkpoint(region, x, w, use_reentrant=use_reentrant)
            if checkpointed
            else region(x, w)
        )
        loss = (y * y).sum()
        loss.backward()
        return loss

    return step, w


X32 = X.astype(np.float32)


@pytest.mark.parametrize("p, use_reentrant", [(0.0, False), (0.3, False), (0.3, True)])
def test_compiled_step_matches(p, use_reentrant):
    """Under capture the recompute is traced into the backward (with the dropout draws of
    the forward replayed); the compiled step gives the unchecked compiled step's numbers
    bit for bit, and eager's."""
    results = []
    for checkpointed in (False, True):
        step, w = compiled_case(checkpointed, p, use_reentrant)
        staged.manual_seed(5)
        results.append((staged.compile(step)(staged.tensor(X32)).detach().numpy(), w.grad.numpy()))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    step, w = compiled_case(True, p, use_reentrant)
    staged.manual_seed(5)
    for a, b in zip(results[1], (step(staged.tensor(X32)), w.grad)):
        assert_close(a, b.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_compiled_recompute_is_not_merged_with_the_forward(use_reentrant):
    """The recompute reads its tensor inputs through optimization barriers, in the backward
    part of the graph: IREE cannot merge it back into the forward (common-subexpression
    elimination did, and the activations lived until backward), so the checkpointed step
    compiles to more dispatches than the unchecked one."""
    x = staged.tensor(X32)
    plain, checked = (
        staged.capture(compiled_case(c, use_reentrant=use_reentrant)[0], x) for c in (False, True)
    )
    barriers = [op.phase for op in checked.graph.ops if op.prim.name == "barrier"]
    assert barriers == ["backward"] * 2  # x and w
    assert checked.to_mlir().count("util.optimization_barrier") == 2

    def dispatches(traced):
        flow = compile_str(
            traced.to_mlir(),
            target_backends=["llvm-cpu"],
            extra_args=flags("llvm-cpu") + ["--compile-to=flow"],
        )
        return flow.decode().count("flow.dispatch @")

    assert dispatches(checked) > dispatches(plain)
