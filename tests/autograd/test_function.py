"""Custom autograd Functions against torch 2.13: the same class written for both."""

import re
import warnings

import numpy as np
import pytest
import torch

import staged
from staged.autograd.function import once_differentiable as s_once
from tests.checks import assert_close
from torch.autograd.function import once_differentiable as t_once


def both(build):
    """``build(lib, Function, once_differentiable)`` defines a Function for each library."""
    return (
        build(staged, staged.autograd.Function, s_once),
        build(torch, torch.autograd.Function, t_once),
    )


def leaves(*arrays):
    return (
        [staged.tensor(a, requires_grad=True) for a in arrays],
        [torch.tensor(a, requires_grad=True) for a in arrays],
    )


def _exp(lib, Function, once):
    class Exp(Function):  # the seed's example
        @staticmethod
        def forward(ctx, i):
            result = i.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            (result,) = ctx.saved_tensors
            return grad_output * result

    return Exp


X = np.array([0.3, -1.2, 0.7])


def test_seed_exp_example_values_grads_and_node():
    (S, T), ((sx,), (tx,)) = both(_exp), leaves(X)
    sy, ty = S.apply(sx), T.apply(tx)
    assert_close(sy, ty)
    assert sy.grad_fn.name() == ty.grad_fn.name() == "ExpBackward"
    assert (
        sy.grad_fn.next_functions[0][0] is sx.grad_fn
        or type(sy.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
    )
    (sy * sy).sum().backward()
    (ty * ty).sum().backward()
    assert_close(sx.grad, tx.grad)


def test_create_graph_through_differentiable_backward():
    (S, T), ((sx,), (tx,)) = both(_exp), leaves(X)
    (sg,) = staged.autograd.grad(S.apply(sx).sum(), sx, create_graph=True)
    (tg,) = torch.autograd.grad(T.apply(tx).sum(), tx, create_graph=True)
    assert sg.requires_grad and tg.requires_grad
    assert_close(
        staged.autograd.grad((sg**2).sum(), sx)[0], torch.autograd.grad((tg**2).sum(), tx)[0]
    )


def _scale(lib, Function, once):
    class Scale(Function):  # forward without ctx + setup_context, non-tensor argument
        @staticmethod
        def forward(a, k, b):
            assert not lib.is_grad_enabled()
            return a * k + b

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.k = inputs[1]
            ctx.seen = ctx.needs_input_grad

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None, g  # b's grad has the output's shape: summed to [1, 3]

    return Scale


def test_setup_context_non_tensor_args_needs_input_grad_and_grad_mode():
    (S, T) = both(_scale)
    (sa, sb), (ta, tb) = leaves(np.ones((2, 3)), np.zeros((1, 3)))
    so, to = S.apply(sa, 2.5, sb), T.apply(ta, 2.5, tb)
    assert so.grad_fn.seen == to.grad_fn.seen == (True, False, True)
    assert len(so.grad_fn.next_functions) == len(to.grad_fn.next_functions) == 2
    so.sum().backward()
    to.sum().backward()
    assert_close(sa.grad, ta.grad)
    assert_close(sb.grad, tb.grad)


def _two(materialize):
    def build(lib, Function, once):
        class Two(Function):
            @staticmethod
            def forward(ctx, a):
                ctx.set_materialize_grads(materialize)
                return a * 2, a * 3

            @staticmethod
            def backward(ctx, g1, g2):
                ctx.got = (g1 is None, g2 is None)
                return (0 if g1 is None else g1 * 2) + (0 if g2 is None else g2 * 3)

        return Two

    return build


@pytest.mark.parametrize("materialize", [True, False])
def test_multiple_outputs_and_materialize_grads(materialize):
    (S, T), ((sx,), (tx,)) = both(_two(materialize)), leaves(X)
    sp, sq = S.apply(sx)
    tp, tq = T.apply(tx)
    assert sq._output_nr == tq.output_nr == 1
    sp.sum().backward()
    tp.sum().backward()
    assert sp.grad_fn.got == tp.grad_fn.got == (False, materialize is False)
    assert_close(sx.grad, tx.grad)


def _sort(lib, Function, once):
    class Sort(Function):
        @staticmethod
        def forward(ctx, a):
            idx = a.argmax(0, keepdim=True)
            ctx.mark_non_differentiable(idx)
            return a * 1, idx

        @staticmethod
        def backward(ctx, gv, gi):
            ctx.gi = gi.tolist()
            return gv * 1

    return Sort


def test_mark_non_differentiable_output_gets_zero_grad():
    (S, T), ((sx,), (tx,)) = both(_sort), leaves(X)
    (sv, si), (tv, ti) = S.apply(sx), T.apply(tx)
    assert (si.requires_grad, si.grad_fn) == (ti.requires_grad, ti.grad_fn) == (False, None)
    sv.sum().backward()
    tv.sum().backward()
    assert sv.grad_fn.gi == tv.grad_fn.gi == [0]


def _double_inplace(lib, Function, once):
    class DoubleInplace(Function):
        @staticmethod
        def forward(ctx, a):
            a.mul_(2)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, g):
            return g * 2

    return DoubleInplace


def test_mark_dirty_rebases_the_input_and_bumps_its_version():
    (S, T), ((sx,), (tx,)) = both(_double_inplace), leaves(X)
    sy, ty = sx * 1, tx * 1
    so, to = S.apply(sy), T.apply(ty)
    assert so is sy and to is ty
    assert sy._version == ty._version == 2
    assert sy.grad_fn.name() == ty.grad_fn.name() == "DoubleInplaceBackward"
    (so * so).sum().backward()
    (to * to).sum().backward()
    assert_close(sx.grad, tx.grad)
    msg = "a leaf Variable that requires grad has been used in an in-place operation."
    for F, x in ((S, sx), (T, tx)):
        with pytest.raises(RuntimeError, match=re.escape(msg)):
            F.apply(x)


def test_input_returned_as_is_is_a_view_with_the_functions_grad_fn():
    def build(lib, Function, once):
        class Ident(Function):
            @staticmethod
            def forward(ctx, a):
                return a

            @staticmethod
            def backward(ctx, g):
                return g * 3

        return Ident

    (S, T), ((sx,), (tx,)) = both(build), leaves(X)
    so, to = S.apply(sx), T.apply(tx)
    assert so is not sx and to is not tx
    assert so._base is sx and to._base is tx
    so.sum().backward()
    to.sum().backward()
    assert_close(sx.grad, tx.grad)


def _returning(grads, arity=1):
    def build(lib, Function, once):
        class Bad(Function):
            @staticmethod
            def forward(ctx, a, k=None):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return grads(g)

        return Bad

    return build


@pytest.mark.parametrize(
    "grads,args,msg",
    [
        (
            lambda g: g * 2,
            2,
            "function BadBackward returned an incorrect number of gradients (expected 2, got 1)",
        ),
        (
            lambda g: (g, g),
            2,
            "function BadBackward returned a gradient different than None at "
            "position 2, but the corresponding forward input was not a Variable",
        ),
        (
            lambda g: (g[:2], None),
            2,
            "Function BadBackward returned an invalid gradient at index 0 "
            "- got [2] but expected shape compatible with [3]",
        ),
    ],
)
def test_wrong_gradients_are_clear_errors(grads, args, msg):
    S, T = both(_returning(grads))
    (sx,), (tx,) = leaves(X)
    for F, x in ((S, sx), (T, tx)):
        with pytest.raises(RuntimeError, match=re.escape(msg)):
            F.apply(*(x, 2)[:args]).sum().backward()


def test_extra_none_gradients_are_allowed():
    S, T = both(_returning(lambda g: (g * 2, None, None)))
    (sx,), (tx,) = leaves(X)
    S.apply(sx, 2).sum().backward()
    T.apply(tx, 2).sum().backward()
    assert_close(sx.grad, tx.grad)


def test_saved_tensors_version_check_and_freeing():
    def build(lib, Function, once):
        class Mul2(Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a * 2

            @staticmethod
            def backward(ctx, g):
                (a,) = ctx.saved_tensors
                return g * a

        return Mul2

    (S, T), ((sx,), (tx,)) = both(build), leaves(X)
    for F, x in ((S, sx), (T, tx)):
        y = x * 1
        out = F.apply(y)
        y.add_(1)
        with pytest.raises(
            RuntimeError,
            match="modified by an inplace operation.*is at version 1; expected version 0 instead",
        ):
            out.sum().backward()
        out = F.apply(x)
        out.sum().backward()
        with pytest.raises(
            RuntimeError, match="Trying to backward through the graph a second time"
        ):
            out.grad_fn.saved_tensors
    with pytest.raises(
        TypeError, match="save_for_backward can only save variables, but argument 1 is of type int"
    ):
        staged.autograd.Function._backward_cls().save_for_backward(sx, 3)


def test_saved_tensor_hooks_apply_to_save_for_backward():
    (S, T), ((sx,), (tx,)) = both(_exp), leaves(X)
    log = {"staged": [], "torch": []}
    for lib, F, x in ((staged, S, sx), (torch, T, tx)):
        name = lib.__name__

        def pack(t, name=name):
            log[name].append("pack")
            return t.detach()

        def unpack(t, name=name):
            log[name].append("unpack")
            return t

        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = F.apply(x)
        y.sum().backward()
    assert log["staged"] == log["torch"] == ["pack", "unpack"]
    assert_close(sx.grad, tx.grad)


def _square_once(lib, Function, once):
    class Square(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        @once
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 2 * a * g

    return Square


def test_once_differentiable():
    (S, T), ((sx,), (tx,)) = both(_square_once), leaves(X)
    (sg,) = staged.autograd.grad(S.apply(sx).sum(), sx, create_graph=True)
    (tg,) = torch.autograd.grad(T.apply(tx).sum(), tx, create_graph=True)
    assert_close(sg, tg)
    assert sg.requires_grad == tg.requires_grad  # grad_output does not require grad
    go_s = staged.ones(3, dtype=staged.float64, requires_grad=True)
    go_t = torch.ones(3, dtype=torch.float64, requires_grad=True)
    (sg,) = staged.autograd.grad(S.apply(sx), sx, go_s, create_graph=True)
    (tg,) = torch.autograd.grad(T.apply(tx), tx, go_t, create_graph=True)
    assert sg.requires_grad and tg.requires_grad
    msg = "trying to differentiate twice a function that was marked with @once_differentiable"
    for g in (sg, tg):
        with pytest.raises(RuntimeError, match=msg):
            g.sum().backward()


def _mul_jvp(lib, Function, once):
    class MulK(Function):
        @staticmethod
        def forward(ctx, a, b, k):
            ctx.save_for_forward(a, b)
            ctx.k = k
            return a * b * k

        @staticmethod
        def jvp(ctx, ta, tb, tk):
            ctx.tk = tk
            a, b = ctx.saved_tensors
            return (ta * b + a * tb) * ctx.k

    return MulK


def test_function_jvp_used_by_forward_ad():
    (S, T), ((sa, sb), (ta, tb)) = both(_mul_jvp), leaves(X, X[::-1].copy())
    res = []
    for lib, F, a, b in ((staged, S, sa, sb), (torch, T, ta, tb)):
        fw = lib.autograd.forward_ad
        with fw.dual_level():
            out = F.apply(fw.make_dual(a, lib.ones_like(a)), b, 2.0)  # b: zeros materialized
            res.append(fw.unpack_dual(out).tangent)
            assert out.grad_fn.tk is None
    assert_close(*res)
    S2, T2 = both(_exp)
    for lib, F, a in ((staged, S2, sa), (torch, T2, ta)):
        fw = lib.autograd.forward_ad
        with (
            fw.dual_level(),
            pytest.raises(NotImplementedError, match="You must implement the jvp function"),
        ):
            F.apply(fw.make_dual(a, lib.ones_like(a)))


def test_missing_backward_is_a_clear_error():
    def build(lib, Function, once):
        class NoBackward(Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

        return NoBackward

    (S, T), ((sx,), (tx,)) = both(build), leaves(X)
    for F, x in ((S, sx), (T, tx)):
        with pytest.raises(
            NotImplementedError, match="You must implement either the backward or vjp method"
        ):
            F.apply(x).sum().backward()


def test_no_grad_forward_records_nothing():
    (S, T), ((sx,), (tx,)) = both(_exp), leaves(X)
    with staged.no_grad():
        so = S.apply(sx)
    with torch.no_grad():
        to = T.apply(tx)
    assert (so.requires_grad, so.grad_fn) == (to.requires_grad, to.grad_fn) == (False, None)


def _fails_in_backward(lib, Function, once):
    class MyFunc(Function):  # the seed's detect_anomaly example
        @staticmethod
        def forward(ctx, inp):
            return inp.clone()

        @staticmethod
        def backward(ctx, gO):
            raise RuntimeError("Some error in backward")

    return MyFunc


def test_detect_anomaly_example_shows_the_forward_call():
    S, T = both(_fails_in_backward)
    for lib, F in ((staged, S), (torch, T)):

        def run_fn(a):
            out = F.apply(a)
            return out.sum()

        inp = lib.rand(10, 10, requires_grad=True)
        with pytest.raises(RuntimeError, match="Some error in backward"):
            run_fn(inp).backward()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with lib.autograd.detect_anomaly():
                inp = lib.rand(10, 10, requires_grad=True)
                out = run_fn(inp)
                with pytest.raises(RuntimeError, match="Some error in backward"):
                    out.backward()
        text = "\n".join(str(w.message) for w in caught)
        assert "Error detected in MyFuncBackward" in text
        assert "out = F.apply(a)" in text and "run_fn" in text


def test_custom_function_compiles_and_matches_eager():
    S, _ = both(_exp)
    Sq, _ = both(_square_once)
    w0 = np.array([[0.5, -0.3], [0.2, 0.8]], dtype=np.float32)
    xb = staged.tensor(np.array([[1.0, 2.0], [-1.0, 0.5]], dtype=np.float32))

    def step(w, x):
        loss = Sq.apply(S.apply(x @ w) - 1).sum()
        loss.backward()
        return loss

    we = staged.tensor(w0, requires_grad=True)
    le = step(we, xb)
    wc = staged.tensor(w0, requires_grad=True)
    lc = staged.compile(step)(wc, xb)
    assert_close(lc, le, rtol=1e-5, atol=1e-5)
    assert_close(wc.grad, we.grad, rtol=1e-5, atol=1e-5)
