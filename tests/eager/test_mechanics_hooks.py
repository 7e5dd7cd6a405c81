"""Autograd mechanics: backward hooks (order, grad() vs backward(), multi-grad hooks,
gradient edges), saved tensors and their hooks; against torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close
from tests.eager.test_mechanics_inplace import both, raises_like_torch


def _hook_log(T, how):
    """Every kind of hook on y = x * 2 and its leaf x, each logging and changing grads."""
    log = []
    x = T.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.register_hook(lambda g: (log.append(("tensor", g.tolist())), g * 10)[1])
    y.register_hook(lambda g: log.append(("tensor2", g.tolist())))
    y.grad_fn.register_prehook(lambda go: (log.append(("pre", go[0].tolist())), (go[0] + 1,))[1])
    y.grad_fn.register_hook(lambda gi, go: log.append(("post", gi[0].tolist(), go[0].tolist())))
    x.register_hook(lambda g: log.append(("leaf", g.tolist())))
    x.register_post_accumulate_grad_hook(lambda t: log.append(("post_acc", t.grad.tolist())))
    acc = y.grad_fn.next_functions[0][0]
    acc.register_prehook(lambda go: log.append(("acc_pre", go[0].tolist())))
    acc.register_hook(lambda gi, go: log.append(("acc_post",)))
    if how == "backward":
        y.sum().backward()
    elif how == "grad-y":
        T.autograd.grad(y.sum(), [y])
    else:
        T.autograd.grad(y.sum(), [x])
    return log, y.grad.tolist() if y.grad is not None else None


@pytest.mark.parametrize("how", ["backward", "grad-y", "grad-x"])
def test_hook_kinds_fire_in_torch_order(how):
    """Tensor hooks (registration order, later see earlier changes), retain_grad, Node
    pre-hooks, the Node, post-accumulate-grad hooks, Node post-hooks; with grad(), the
    Nodes of tensors passed as inputs do not run but their tensor hooks do."""
    ours, theirs = both(lambda T: _hook_log(T, how))
    assert ours == theirs


def test_backward_inputs_runs_the_input_nodes_hooks():
    def run(T):
        log = []
        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        z = y * 3
        y.register_hook(lambda g: log.append("y-hook"))
        y.grad_fn.register_prehook(lambda go: log.append("y-node-pre"))
        z.sum().backward(inputs=[y])
        return log, y.grad.tolist(), x.grad

    ours, theirs = both(run)
    assert ours == theirs and ours[2] is None


def test_post_accumulate_grad_hook_on_non_leaf_raises():
    raises_like_torch(
        lambda T: (T.ones(2, requires_grad=True) * 2).register_post_accumulate_grad_hook(
            lambda t: None
        ),
        "post accumulate grad hooks cannot be registered on non-leaf tensors",
    )


def test_removable_handles_and_node_api():
    def run(T):
        log = []
        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()
        handles = [
            y.register_hook(lambda g: log.append("t")),
            y.grad_fn.register_hook(lambda gi, go: log.append("post")),
            y.grad_fn.register_prehook(lambda go: log.append("pre")),
        ]
        for h in handles:
            h.remove()
        y.grad_fn.metadata["tag"] = "mine"
        y.sum().backward()
        node = y.grad_fn
        return (
            log,
            node.name(),
            node.metadata["tag"],
            node.next_functions[0][0].name(),
            isinstance(node, T.autograd.graph.Node),
        )

    ours, theirs = both(run)
    assert ours[0] == theirs[0] == []
    assert ours[1:3] == theirs[1:3] and ours[4] is theirs[4] is True
    assert ours[3] == theirs[3] == "torch::autograd::AccumulateGrad"


def test_multi_grad_hook_seed_example():
    def run(T):
        out = []
        a = T.rand(2, 3, requires_grad=True)
        b = T.rand(2, 3, requires_grad=True)
        c = a * b
        d = a * b
        h = T.autograd.graph.register_multi_grad_hook(
            (a, b, c, d), lambda grads: out.append([g is not None for g in grads])
        )
        c.sum().backward(retain_graph=True)
        c.sum().backward(inputs=(a,), retain_graph=True)
        h.remove()
        c.sum().backward(retain_graph=True)
        return out

    ours, theirs = both(run)
    assert ours == theirs == [[True, True, True, False], [True, False, True, False]]


def test_multi_grad_hook_any_mode_fires_once_with_the_first_grad():
    def run(T):
        out = []
        a = T.tensor([1.0], requires_grad=True)
        b = T.tensor([2.0], requires_grad=True)
        y = a * 3
        T.autograd.graph.register_multi_grad_hook(
            (a, y), lambda g: out.append(g.tolist()), mode="any"
        )
        (y * b).sum().backward()
        return out

    ours, theirs = both(run)
    assert ours == theirs == [[2.0]]


def test_gradient_edge_gives_the_same_gradient():
    def run(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        h = x.exp()
        loss = (h * h).sum()
        edge = T.autograd.graph.get_gradient_edge(h)
        (g1,) = T.autograd.grad(loss, edge, retain_graph=True)
        (g2,) = T.autograd.grad(loss, h, retain_graph=True)
        (g3,) = T.autograd.grad(loss, T.autograd.graph.get_gradient_edge(x))
        return g1, g2, g3, edge.node.name(), edge.output_nr

    ours, theirs = both(run)
    for a, b in zip(ours[:3], theirs[:3]):
        assert_close(a, b, rtol=1e-6)
    assert ours[3:] == theirs[3:]


def test_gradient_layout_in_place_without_create_graph_new_with_it():
    def run(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()
        g0 = x.grad
        (x * x).sum().backward()
        same = x.grad is g0
        (x * x).sum().backward(create_graph=True)
        return same, x.grad is g0, x.grad.requires_grad, x.grad

    ours, theirs = both(run)
    assert ours[:3] == theirs[:3] == (True, False, True)
    assert_close(ours[3], theirs[3])


# --- saved tensors ---------------------------------------------------------------------
def test_saved_self_and_result_seed_examples():
    x = staged.randn(5, requires_grad=True)
    y = x.pow(2)
    assert x.equal(y.grad_fn._saved_self) and x is y.grad_fn._saved_self
    y = x.exp()
    assert y.equal(y.grad_fn._saved_result) and y is not y.grad_fn._saved_result
    assert y.grad_fn._saved_result.grad_fn is y.grad_fn
    tx = torch.randn(5, requires_grad=True)
    assert tx is tx.pow(2).grad_fn._saved_self


def test_raw_saved_register_hooks_pack_now_unpack_per_access():
    def run(T):
        log = []
        x = T.randn(5, requires_grad=True)
        y = x.pow(2)
        raw = y.grad_fn._raw_saved_self
        raw.register_hooks(
            lambda t: (log.append("pack"), t * 1)[1], lambda p: (log.append("unpack"), p)[1]
        )
        steps = [list(log)]
        y.grad_fn._saved_self
        steps.append(list(log))
        y.sum().backward(retain_graph=True)
        steps.append(list(log))
        return steps, x.grad / x.detach(), raw, y

    (steps, g, raw, y), (tsteps, tg, traw, ty) = both(run)
    assert steps == tsteps == [["pack"], ["pack", "unpack"], ["pack", "unpack", "unpack"]]
    assert_close(g, tg, rtol=1e-6)  # 2 x / x
    for r in (raw, traw):
        with pytest.raises(RuntimeError, match="whose hooks have already been set"):
            r.register_hooks(lambda t: t, lambda t: t)
    y.sum().backward()
    ty.sum().backward()
    for r in (raw, traw):
        with pytest.raises(RuntimeError, match="after it has been freed"):
            r.register_hooks(lambda t: t, lambda t: t)
    for n in (y.grad_fn, ty.grad_fn):
        with pytest.raises(
            RuntimeError, match="Trying to backward through the graph a second time"
        ):
            n._saved_self


def test_saved_tensors_hooks_seed_example():
    def run(T):
        log = []
        a = T.ones(5, requires_grad=True)
        b = T.ones(5, requires_grad=True) * 2
        with T.autograd.graph.saved_tensors_hooks(
            lambda x: (log.append(("pack", x.tolist(), x.grad_fn is not None)), x)[1],
            lambda x: (log.append(("unpack", x.tolist())), x)[1],
        ):
            y = a * b
        y.sum().backward()
        return log, a.grad, b

    (log, g, _), (tlog, tg, _) = both(run)
    assert log == tlog
    assert_close(g, tg)


def test_saved_tensors_hooks_make_new_objects_sharing_storage():
    with staged.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
        x = staged.randn(5, requires_grad=True)
        y = x * x
    s, o = y.grad_fn._saved_self, y.grad_fn._saved_other
    assert s is not x and o is not x and s is not o and s.requires_grad
    assert np.shares_memory(s.numpy(force=True), x.numpy(force=True))
    # gradients through unpacked leaves still reach the leaf (double backward too)
    (g,) = staged.autograd.grad(y.sum(), x, create_graph=True)
    g.sum().backward()
    assert_close(x.grad, staged.full((5,), 2.0))


def test_saved_tensors_hooks_nesting_and_threads():
    """Inner pair wins; the pair set in one thread does not apply in another."""
    import threading

    log = []
    outer = staged.autograd.graph.saved_tensors_hooks(
        lambda t: log.append("outer") or t, lambda t: t
    )
    inner = staged.autograd.graph.saved_tensors_hooks(
        lambda t: log.append("inner") or t, lambda t: t
    )
    x = staged.ones(2, requires_grad=True)
    with outer, inner:
        x.exp()
        th = threading.Thread(target=lambda: x.exp())
        th.start()
        th.join()
    assert log == ["inner"]


def test_saved_hook_errors_match_torch():
    def modifies(T):
        h = T.randn(3, requires_grad=True) * 1
        with T.autograd.graph.saved_tensors_hooks(lambda t: t.add_(1), lambda t: t):
            h * h

    raises_like_torch(modifies, "A saved tensor pack hook is modifying its input in place.")

    def bad_unpack(T):
        x = T.randn(3, requires_grad=True)
        with T.autograd.graph.saved_tensors_hooks(lambda t: 3, lambda t: t):
            y = x * x
        y.sum().backward()

    raises_like_torch(
        bad_unpack,
        "Output of saved tensor unpack_hook expected to be a Tensor but got result of type int",
    )

    def disabled(T):
        with T.autograd.graph.disable_saved_tensors_hooks("hooks are off here"):
            with T.autograd.graph.save_on_cpu():
                pass

    raises_like_torch(disabled, "hooks are off here")


def test_save_on_cpu_seed_example():
    def f(T, a, b, c):
        prod_1 = a * b
        with T.autograd.graph.save_on_cpu():
            prod_2 = prod_1 * c
        return prod_2 * a

    def run(T):
        a, b, c = (T.tensor([1.0, 2.0, 3.0], requires_grad=True) * 1 for _ in range(3))
        leaves = [t.detach().requires_grad_() for t in (a, b, c)]
        f(T, *leaves).sum().backward()
        return [t.grad for t in leaves]

    for a, b in zip(*both(run)):
        assert_close(a, b)


def test_inference_tensor_saved_for_backward_raises():
    def run(T):
        with T.inference_mode():
            a = T.ones(3)
        w = T.ones(3, requires_grad=True)
        (a + w).sum().backward()  # nothing of `a` is saved: fine
        a * w

    raises_like_torch(run, "Inference tensors cannot be saved for backward.")
