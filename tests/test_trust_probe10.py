"""Silent wrong results in the function transforms (the tenth trust probe): ``vmap``'s
batching rules (reductions and scans along negative dims, gather/scatter/index_select
with batched indices, views and in-place ops on batched tensors, matmul/einsum/conv with
mixed batched and unbatched operands, losses and norms, ``in_dims``/``out_dims`` on
nested pytrees, ``chunk_size``, nesting, randomness), ``grad``/``vjp``/``jvp``/
``jacrev``/``jacfwd``/``hessian`` (argnums, has_aux, composed with ``vmap`` and each
other, closures over tensors that require grad), forward AD (dual views, in-place writes,
ties), ``functional_call`` (tied weights, buffers, strict) and
``autograd.functional`` (vectorize, strict, create_graph), some under ``staged.compile``.
A case is an expression in ``L`` evaluated with ``L`` over staged and over torch 2.13's
torch.func: the same values, dtypes and shapes, or the same exception type (and message,
where torch's is worded for this case)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as torch_fw
import torch.autograd.functional as torch_af
import torch.func as torch_func
import torch.nn.functional as torch_F

import staged
import staged.autograd.forward_ad as staged_fw
import staged.autograd.functional as staged_af
import staged.func as staged_func
import staged.nn.functional as staged_F
from tests.checks import message, to_numpy

# torch warns of its vmap fallbacks and of deprecated dims; staged is not under test there
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class _Lib:
    """staged or torch, with the names the cases use: ``L.F``, ``L.func``, ``L.fw``
    (forward AD), ``L.AF`` (autograd.functional) and ``L.t(array)``."""

    def __init__(self, lib):
        self.lib = lib
        ours = lib is staged
        self.F = staged_F if ours else torch_F
        self.func = staged_func if ours else torch_func
        self.fw = staged_fw if ours else torch_fw
        self.AF = staged_af if ours else torch_af

    def __getattr__(self, name):
        return getattr(self.lib, name)

    def t(self, a, rg=False):
        x = self.lib.tensor(np.asarray(a))
        return x.requires_grad_() if rg else x


def rn(*shape) -> np.ndarray:
    """Normal float64 numbers, the same for each shape."""
    return np.random.default_rng(sum(shape) * 7 + len(shape)).standard_normal(shape)


def ri(hi, *shape) -> np.ndarray:
    """int64 numbers in ``[0, hi)``, the same for each shape."""
    return np.random.default_rng(sum(shape) * 3 + hi).integers(0, hi, shape)


def X(L, *shape):
    return L.t(rn(*shape))


def XF(L, *shape):
    return L.t(rn(*shape)).float()


def V(L, f, *args, **kwargs):
    return L.func.vmap(f, **kwargs)(*args)


def rnd(L, f, *args, **kwargs):
    """``vmap(f, randomness="different")`` from a seeded default generator."""
    L.manual_seed(5)
    return L.func.vmap(f, randomness="different", **kwargs)(*args)


def dual(L, body):
    """``[primal, tangent]`` of each tensor ``body()`` returns inside a dual level."""

    def unpack(o):
        if isinstance(o, (tuple, list)):
            return [unpack(v) for v in o]
        if isinstance(o, (staged.Tensor, torch.Tensor)):
            return list(L.fw.unpack_dual(o))
        return o

    with L.fw.dual_level():
        return unpack(body())


def fw(L, fn, x, tx):
    return dual(L, lambda: fn(L.fw.make_dual(x, tx)))


def level(L, body):
    """``body()`` inside ``enter_dual_level``/``exit_dual_level``."""
    L.fw.enter_dual_level()
    try:
        return body()
    finally:
        L.fw.exit_dual_level()


def rosenbrock(x):
    return ((1 - x[:-1]) ** 2 + 100 * (x[1:] - x[:-1] ** 2) ** 2).sum()


def f1(x):
    return (x.sin() * x.roll(1)).cumsum(0)


def f2(x, y):
    return (x.exp() * y.sum(), (x[:, None] * y).tanh())


def s1(x):
    return (x.sin() * x.roll(1)).sum() + x.pow(3).prod()


def s2(x, y):
    return (x.exp() * y[:2].sum()).sum() + (y**3).sum()


def mlp(L):
    """A float32 MLP 3-4-2 with the same weights under staged and torch."""
    L.manual_seed(0)
    m = L.nn.Sequential(L.nn.Linear(3, 4), L.nn.Tanh(), L.nn.Linear(4, 2))
    with L.no_grad():
        for p in m.parameters():
            p.copy_(L.t(rn(*p.shape) * 0.5))
    return m


def params(m):
    return {k: v.detach() for k, v in m.named_parameters()}


def per_example(L, m, x, y):
    def loss(p, x, y):
        return L.F.cross_entropy(L.func.functional_call(m, p, (x[None],)), y[None])

    return L.func.vmap(L.func.grad(loss), in_dims=(None, 0, 0))(params(m), x, y)


def tied(L):
    """A module whose two Linear layers share one weight, and a buffer."""

    class M(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = L.nn.Linear(3, 3, bias=False)
            self.b = L.nn.Linear(3, 3, bias=False)
            self.b.weight = self.a.weight
            self.register_buffer("buf", L.ones(3))

        def forward(self, x):
            return self.b(self.a(x)) + self.buf

    L.manual_seed(0)
    return M()


def bn(L):
    L.manual_seed(0)
    return L.nn.Sequential(L.nn.Linear(3, 3), L.nn.BatchNorm1d(3))


def closure(L, fn):
    """``fn(x, y)``'s results and their gradient with respect to ``y``: a tensor that
    requires grad, captured by the transformed function."""
    y, x = L.t(rn(3), rg=True), L.t(rn(3) + 1)
    out = fn(x, y)
    return out, L.autograd.grad(sum(o.sum() for o in out), y)


def written_through_views(L):
    x = L.fw.make_dual(X(L, 3, 2), X(L, 3, 2))
    base = L.zeros(3, 2, dtype=L.float64)
    v = base[:, 0]
    v.copy_(x[:, 1] * 3)
    return base, v, base.T


def dual_of_view(L):
    d = L.fw.make_dual(X(L, 3, 4)[1:], X(L, 2, 4))
    return d, d.T


def base_written_after_view(L):
    y = L.fw.make_dual(X(L, 3, 4), X(L, 3, 4)).clone()
    v = y[:, 1]
    y.mul_(2)
    return y, v


def duals_written_into_dual(L):
    a = L.fw.make_dual(X(L, 3, 4), X(L, 3, 4))
    b = L.fw.make_dual(X(L, 4), X(L, 4) * 2)
    y = a.clone()
    y[1] = b
    y[:, 0] = b[:3]
    return y


def grad_of_tangent(L, t):
    x = X(L, 3, 2).requires_grad_()
    t = t.detach().requires_grad_()
    with L.fw.dual_level():
        y = (L.fw.make_dual(x, t).exp() * x).sum()
        return L.autograd.grad(L.fw.unpack_dual(y).tangent, (x, t))


def custom_function(L):
    class Twice(L.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x.sin() * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos() * 2

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return t * x.cos() * 2

    return (
        L.func.vmap(L.func.grad(lambda x: Twice.apply(x).sum()))(X(L, 3, 4)),
        L.func.jvp(Twice.apply, (X(L, 3),), (X(L, 3),)),
    )


def compiled(L, f):
    """``staged.compile(f)`` under staged; torch's ``f`` eagerly."""
    return staged.compile(f) if L.lib is staged else f


def compiled_per_example(L):
    m = mlp(L)
    step = compiled(
        L,
        lambda p, x, y: L.func.vmap(
            L.func.grad(
                lambda p, x, y: L.F.cross_entropy(L.func.functional_call(m, p, (x[None],)), y[None])
            ),
            in_dims=(None, 0, 0),
        )(p, x, y),
    )
    return [step(params(m), XF(L, 5, 3) * k, L.t(ri(2, 5))) for k in (1, 2)]


VMAP = {
    "sum_dim_keep": "V(L, lambda x: x.sum(1, keepdim=True), X(L, 3, 4, 5))",
    "sum_negdim": "V(L, lambda x: x.sum(-1), X(L, 3, 4, 5), in_dims=1)",
    "mean_tuple_neg": "V(L, lambda x: x.mean((-1, 0)), X(L, 3, 4, 5), in_dims=2)",
    "amax_dim": "V(L, lambda x: x.amax(-2, keepdim=True), X(L, 3, 4, 5), in_dims=-1)",
    "max_dim": "V(L, lambda x: x.max(0), X(L, 3, 4, 5), in_dims=1)",
    "argmax_none": "V(L, lambda x: x.argmax(), X(L, 3, 4, 5))",
    "argmax_dim": "V(L, lambda x: x.argmax(-1, keepdim=True), X(L, 3, 4, 5), in_dims=1)",
    "std_dim": "V(L, lambda x: x.std(0, correction=0), X(L, 3, 4, 5), in_dims=2)",
    "var_all": "V(L, lambda x: x.var(), X(L, 3, 4, 5), in_dims=1)",
    "logsumexp": "V(L, lambda x: x.logsumexp(-1), X(L, 3, 4, 5), in_dims=2)",
    "norm_dim": "V(L, lambda x: L.linalg.vector_norm(x, 3, dim=-1), X(L, 3, 4, 5), in_dims=1)",
    "prod_dim": "V(L, lambda x: x.prod(0), X(L, 3, 4, 5), in_dims=1)",
    "cumsum_neg": "V(L, lambda x: x.cumsum(-1), X(L, 3, 4, 5), in_dims=2)",
    "cumprod": "V(L, lambda x: x.cumprod(0), X(L, 3, 4, 5), in_dims=1)",
    "cummax": "V(L, lambda x: L.cummax(x, 0), X(L, 3, 4, 5), in_dims=1)",
    "logcumsumexp": "V(L, lambda x: x.logcumsumexp(-1), X(L, 3, 4, 5), in_dims=-1)",
    "sort_desc": "V(L, lambda x: x.sort(-1, descending=True), X(L, 3, 4, 5), in_dims=1)",
    "argsort": "V(L, lambda x: x.argsort(0), X(L, 3, 4, 5), in_dims=2)",
    "topk": "V(L, lambda x: x.topk(2, dim=0), X(L, 3, 4, 5), in_dims=1)",
    "topk_small": "V(L, lambda x: x.topk(2, largest=False), X(L, 3, 4, 5), in_dims=2)",
    "kthvalue": "V(L, lambda x: x.kthvalue(2, 0), X(L, 3, 4, 5), in_dims=1)",
    "median_dim": "V(L, lambda x: x.median(-1), X(L, 3, 4, 5), in_dims=0)",
    "median_all": "V(L, lambda x: x.median(), X(L, 3, 4, 5), in_dims=0)",
    "softmax": "V(L, lambda x: L.F.softmax(x, -1), X(L, 3, 4, 5), in_dims=2)",
    "log_softmax0": "V(L, lambda x: L.F.log_softmax(x, 0), X(L, 3, 4, 5), in_dims=1)",
    "index_sel_batched_idx": "V(L, lambda x, j: x.index_select(1, j), X(L, 3, 4, 5), L.t(ri(4,3,2)), in_dims=(None, 0))",
    "index_sel_both": "V(L, lambda x, j: x.index_select(-1, j), X(L, 3, 4, 5), L.t(ri(5,2,4)), in_dims=(1, 1))",
    "gather_batched_idx": "V(L, lambda x, j: x.gather(1, j), X(L, 4, 5), L.t(ri(5,3,4,2)), in_dims=(None, 0))",
    "gather_both": "V(L, lambda x, j: x.gather(0, j), X(L, 3, 4, 5), L.t(ri(4,2,5,3)), in_dims=(0, 2))",
    "scatter_add": "V(L, lambda x, j, s: x.scatter_add(0, j, s), X(L, 3, 4, 5), L.t(ri(4,3,2,5)), X(L, 2, 5), in_dims=(0, 0, None))",
    "scatter_src_batched": "V(L, lambda x, j, s: x.scatter(1, j, s), X(L, 4, 5), L.t(ri(5,4,2)), X(L, 3, 4, 2), in_dims=(None, None, 0))",
    "scatter_reduce": 'V(L, lambda x, j, s: x.scatter_reduce(1, j, s, "amax", include_self=False), X(L, 3, 4, 5), L.t(ri(5,4,2)), X(L, 4, 2, 3), in_dims=(0, None, 2))',
    "index_add": "V(L, lambda x, j, s: x.index_add(0, j, s), X(L, 4, 5), L.t(ri(4,3,2)), X(L, 2, 5), in_dims=(None, 0, None))",
    "adv_index_tensor": "V(L, lambda x, j: x[j], X(L, 3, 4, 5), L.t(ri(4,3,2)), in_dims=(0, 0))",
    "adv_index_two": "V(L, lambda x, j, k: x[j, :, k], X(L, 3, 4, 5, 6), L.t(ri(4,3,2)), L.t(ri(6,2)), in_dims=(0, 0, None))",
    "adv_index_mid": "V(L, lambda x, j: x[:, j], X(L, 3, 4, 5), L.t(ri(5,3,2)), in_dims=(0, 0))",
    "index_put_batched_val": "V(L, lambda x, v: x.index_put((L.t(np.array([0,2])),), v), X(L, 4, 5), X(L, 3, 2, 5), in_dims=(None, 0))",
    "bool_mask_where": "V(L, lambda x, m: L.where(m, x, -x), X(L, 3, 4), L.t(rn(4,3)>0), in_dims=(0, 1))",
    "masked_fill": "V(L, lambda x, m: x.masked_fill(m, 7.0), X(L, 3, 4), L.t(rn(3,4)>0), in_dims=(0, 0))",
    "masked_fill_tensor_val": "V(L, lambda x, v: x.masked_fill(x > 0, v), X(L, 3, 4), X(L, 3), in_dims=(0, 0))",
    "where_scalar": "V(L, lambda x: L.where(x > 0, x, 0.0), X(L, 3, 4), in_dims=1)",
    "view_inplace": "V(L, lambda x: (x.view(2, -1)[0].mul_(2), x)[1], X(L, 3, 4).clone())",
    "transpose_inplace": "V(L, lambda x: (x.t().add_(1), x)[1], X(L, 3, 4, 2).clone(), in_dims=2)",
    "diag_view_inplace": "V(L, lambda x: (x.diagonal().zero_(), x)[1], X(L, 3, 3, 3).clone(), in_dims=1)",
    "unfold": "V(L, lambda x: x.unfold(0, 2, 1), X(L, 3, 5), in_dims=0)",
    "narrow": "V(L, lambda x: x.narrow(-1, 1, 2), X(L, 3, 4, 5), in_dims=1)",
    "flip_roll": "V(L, lambda x: x.flip(-1).roll(1, 0), X(L, 3, 4, 5), in_dims=2)",
    "movedim": "V(L, lambda x: x.movedim(0, -1).reshape(-1), X(L, 3, 4, 5), in_dims=1)",
    "squeeze_neg": "V(L, lambda x: x.unsqueeze(-1).squeeze(-1).unsqueeze(0), X(L, 3, 4, 5), in_dims=1)",
    "expand": "V(L, lambda x: x[:, None].expand(-1, 3, -1), X(L, 3, 4, 5), in_dims=2)",
    "repeat": "V(L, lambda x: x.repeat(2, 1, 3), X(L, 3, 4, 5), in_dims=1)",
    "tril": "V(L, lambda x: x.tril(-1), X(L, 3, 4, 5), in_dims=2)",
    "diag_embed": "V(L, lambda x: L.diag_embed(x), X(L, 3, 4), in_dims=1)",
    "trace": "V(L, lambda x: x.trace(), X(L, 3, 4, 4), in_dims=1)",
    "matmul_mixed": "V(L, lambda x, w: x @ w, X(L, 3, 4, 5), X(L, 5, 2), in_dims=(1, None))",
    "matmul_vec": "V(L, lambda x, w: w @ x, X(L, 3, 5), X(L, 4, 5), in_dims=(0, None))",
    "matmul_vv": "V(L, lambda x, w: x @ w, X(L, 3, 5), X(L, 5, 3), in_dims=(0, 1))",
    "bmm_mixed": "V(L, lambda x, w: L.bmm(x, w), X(L, 2, 3, 4, 5), X(L, 2, 5, 2), in_dims=(1, None))",
    "einsum_mixed": 'V(L, lambda x, w: L.einsum("ij,jk->ki", x, w), X(L, 3, 4, 5), X(L, 5, 2), in_dims=(0, None))',
    "einsum_ellipsis": 'V(L, lambda x, w: L.einsum("...j,j->...", x, w), X(L, 3, 4, 5), X(L, 5, 3), in_dims=(2, 1))',
    "outer": "V(L, lambda x, w: L.outer(x, w), X(L, 3, 4), X(L, 5), in_dims=(0, None))",
    "cat_none": "V(L, lambda x, y: L.cat([x, y], -1), X(L, 3, 4), X(L, 2), in_dims=(0, None))",
    "stack_none": "V(L, lambda x, y: L.stack([y, x], 1), X(L, 4, 3), X(L, 4), in_dims=(1, None))",
    "promote_int_float": 'V(L, lambda x, y: x * y + 1, L.t(ri(5,3,4)), L.t(rn(4), dtype="float32"), in_dims=(0, None))',
    "promote_scalar_int": "V(L, lambda x: x / 2, L.t(ri(5,3,4)), in_dims=1)",
    "promote_0d": 'V(L, lambda x, s: x * s, L.t(rn(3,4), dtype="float32"), L.t(np.array([1.5,2.,3.])), in_dims=(0, 0))',
    "out_dims_1": "V(L, lambda x: x.sum(0), X(L, 3, 4, 5), out_dims=1)",
    "out_dims_neg": "V(L, lambda x: (x, x.sum(0)), X(L, 3, 4, 5), in_dims=1, out_dims=(-1, 0))",
    "out_dims_none": "V(L, lambda x, y: (x * 2, y), X(L, 3, 4), X(L, 2), in_dims=(0, None), out_dims=(0, None))",
    "in_dims_dict": 'V(L, lambda d: d["a"] + d["b"][0], {"a": X(L, 3, 4), "b": [X(L, 4, 3)]}, in_dims=({"a": 0, "b": [1]},))',
    "in_dims_tuple_nested": "V(L, lambda p: p[0] * p[1], (X(L, 3, 4), X(L, 4)), in_dims=((0, None),))",
    "chunk_size": "V(L, lambda x: x.sin().sum(-1), X(L, 5, 4), chunk_size=2)",
    "chunk_size_out1": "V(L, lambda x: x.sin(), X(L, 5, 4), chunk_size=2, out_dims=1)",
    "nested": "L.func.vmap(L.func.vmap(lambda x, y: x @ y, in_dims=(0, None)), in_dims=(None, 0))(X(L, 3, 4), X(L, 2, 4, 5))",
    # strides inside vmap: the physical value's without its batch dim
    "stride_in1": "V(L, lambda x: L.tensor(list(x.stride())) + x.sum(), X(L, 3, 4, 5), in_dims=1)",
    "is_contiguous_in1": "V(L, lambda x: x * x.is_contiguous(), X(L, 3, 4, 2), in_dims=1)",
    "stride_t_in1": "V(L, lambda x: L.tensor(list(x.t().stride()) + [x.t().is_contiguous()]) + x.sum(), X(L, 3, 4, 5), in_dims=1)",
    "stride_contiguous": "V(L, lambda x: L.tensor(list(x.contiguous().stride()) + list(x.t().contiguous().stride()) + [x.contiguous().is_contiguous()]) + x.t().contiguous().sum(), X(L, 3, 4, 5), in_dims=1)",
    "stride_nested": "L.func.vmap(L.func.vmap(lambda x: L.tensor(list(x.stride())) + x.sum(), in_dims=1), in_dims=2)(X(L, 3, 4, 5, 2))",
    "stride_clone": "V(L, lambda x: L.tensor(list(x.clone().stride()) + list(x.t().clone().stride()) + list(x.t().clone(memory_format=L.contiguous_format).stride())) + x.sum(), X(L, 3, 4, 2), in_dims=1)",
    "is_contiguous_channels_last_err": "V(L, lambda x: x * x[None].is_contiguous(memory_format=L.channels_last), X(L, 3, 4, 2, 2), in_dims=1)",
    "nested_dims": "L.func.vmap(L.func.vmap(lambda x: x.sum(0), in_dims=1), in_dims=2)(X(L, 3, 4, 5))",
    "nested_outdims": "L.func.vmap(L.func.vmap(lambda x: x * 2, out_dims=1), in_dims=1, out_dims=2)(X(L, 2, 3, 4, 5))",
    "int_out": "V(L, lambda x: x.shape[0] + x, X(L, 3, 4))",
    "scalar_return": "V(L, lambda x: 3.0, X(L, 3, 4))",
    "conv2d": "V(L, lambda x, w: L.F.conv2d(x, w, padding=1), X(L, 2, 1, 2, 5, 5), X(L, 3, 2, 3, 3), in_dims=(0, None))",
    "conv2d_w_batched": "V(L, lambda x, w: L.F.conv2d(x, w, stride=2), X(L, 1, 2, 5, 5), X(L, 2, 3, 2, 3, 3), in_dims=(None, 0))",
    "conv1d_unbatched_in": "V(L, lambda x, w: L.F.conv1d(x, w), X(L, 2, 2, 7), X(L, 3, 2, 3), in_dims=(0, None))",
    "maxpool": "V(L, lambda x: L.F.max_pool2d(x, 2), X(L, 2, 1, 3, 4, 4), in_dims=0)",
    "avgpool": "V(L, lambda x: L.F.avg_pool1d(x, 2, 1), X(L, 2, 3, 6), in_dims=0)",
    "layer_norm": "V(L, lambda x, w: L.F.layer_norm(x, (5,), w), X(L, 3, 4, 5), X(L, 5), in_dims=(1, None))",
    "layer_norm_wb": "V(L, lambda x, w: L.F.layer_norm(x, (5,), w), X(L, 4, 5), X(L, 3, 5), in_dims=(None, 0))",
    "group_norm": "V(L, lambda x: L.F.group_norm(x, 2), X(L, 3, 2, 4, 5), in_dims=0)",
    "ce": "V(L, lambda x, y: L.F.cross_entropy(x, y), X(L, 3, 4, 5), L.t(ri(5,3,4)), in_dims=(0, 0))",
    "ce_label_smooth": 'V(L, lambda x, y: L.F.cross_entropy(x, y, label_smoothing=0.1, reduction="sum"), X(L, 3, 4, 5), L.t(ri(5,4)), in_dims=(0, None))',
    "ce_ignore": "V(L, lambda x, y: L.F.cross_entropy(x, y, ignore_index=1), X(L, 3, 4, 5), L.t(ri(5,3,4)), in_dims=(1, 0))",
    "ce_weight_batched": "V(L, lambda x, y, w: L.F.cross_entropy(x, y, weight=w), X(L, 4, 5), L.t(ri(5,4)), L.t(np.abs(rn(3,5))), in_dims=(None, None, 0))",
    "nll": "V(L, lambda x, y: L.F.nll_loss(x, y), X(L, 3, 4, 5), L.t(ri(5,3,4)), in_dims=(0, 0))",
    "linear_batched_w": "V(L, lambda x, w, b: L.F.linear(x, w, b), X(L, 4, 5), X(L, 3, 2, 5), X(L, 2), in_dims=(None, 0, None))",
    "linear_bias_batched": "V(L, lambda x, w, b: L.F.linear(x, w, b), X(L, 4, 5), X(L, 2, 5), X(L, 3, 2), in_dims=(None, None, 0))",
    "embedding": "V(L, lambda j, w: L.F.embedding(j, w), L.t(ri(5,3,4)), X(L, 5, 2), in_dims=(0, None))",
    "embedding_wb": "V(L, lambda j, w: L.F.embedding(j, w), L.t(ri(5,4)), X(L, 3, 5, 2), in_dims=(None, 0))",
    "one_hot": "V(L, lambda j: L.F.one_hot(j, 5), L.t(ri(5,3,4)))",
    "pad": "V(L, lambda x: L.F.pad(x, (1, 2), value=3.0), X(L, 3, 4, 5), in_dims=1)",
    "pad_reflect": 'V(L, lambda x: L.F.pad(x, (1, 2), mode="reflect"), X(L, 3, 2, 5), in_dims=0)',
    "interp": 'V(L, lambda x: L.F.interpolate(x, scale_factor=2, mode="nearest"), X(L, 3, 1, 2, 4), in_dims=0)',
    "dropout_same": '(L.manual_seed(0), V(L, lambda x: L.F.dropout(x, 0.5) * 0 + x, X(L, 3, 4), randomness="same"))[1]',
    "rand_error": "V(L, lambda x: x + L.rand(4), X(L, 3, 4))",
    "clamp_tensor": "V(L, lambda x, lo: x.clamp(min=lo), X(L, 3, 4), X(L, 4), in_dims=(0, None))",
    "pow_int": "V(L, lambda x: x ** 2, L.t(ri(5,3,4)))",
    "complex": 'V(L, lambda x: L.view_as_complex(x).abs(), L.t(rn(3,4,2), dtype="float32"), in_dims=0)',
    "bincount_err": "V(L, lambda x: L.bincount(x), L.t(ri(5,3,4)))",
    "nonzero_err": "V(L, lambda x: x.nonzero(), X(L, 3, 4))",
    "item_err": "V(L, lambda x: x.sum().item(), X(L, 3, 4))",
    "inplace_unbatched_err": "V(L, lambda x, y: y.add_(x), X(L, 3, 4), X(L, 4), in_dims=(0, None))",
    "in_dims_err": "V(L, lambda x: x, X(L, 3, 4), in_dims=(0, 1))",
    "size_mismatch_err": "V(L, lambda x, y: x + y, X(L, 3, 4), X(L, 2, 4))",
    "in_dim_oob": "V(L, lambda x: x, X(L, 3, 4), in_dims=2)",
    "setitem_batched": "V(L, lambda x, v: (x.__setitem__((slice(None), 0), v), x)[1], X(L, 3, 4, 5).clone(), X(L, 3, 4), in_dims=(0, 0))",
    "setitem_idx_batched": "V(L, lambda x, j: (x.__setitem__(j, 0.0), x)[1], X(L, 3, 4).clone(), L.t(ri(4,3,2)), in_dims=(0, 0))",
    "copy_": "V(L, lambda x, y: x.clone().copy_(y), X(L, 3, 4), X(L, 4), in_dims=(0, None))",
    "new_zeros": "V(L, lambda x: x.new_zeros(2) + x.sum(), X(L, 3, 4))",
    "zeros_like": "V(L, lambda x: L.zeros_like(x) + 1, X(L, 3, 4), in_dims=1)",
    "searchsorted": "V(L, lambda s, v: L.searchsorted(s, v), L.t(np.sort(rn(3,5),-1)), X(L, 3, 2), in_dims=(0, 0))",
    "bucketize": "V(L, lambda v, s: L.bucketize(v, s), X(L, 3, 2), L.t(np.sort(rn(5))), in_dims=(0, None))",
    "cdist": "V(L, lambda a, b: L.cdist(a, b), X(L, 3, 4, 2), X(L, 5, 2), in_dims=(0, None))",
    "unique_err": "V(L, lambda x: L.unique(x), L.t(ri(3,3,4)))",
    "triu_indices_use": "V(L, lambda x: x[L.triu_indices(3, 3)[0], L.triu_indices(3,3)[1]], X(L, 2, 3, 3))",
    "chunk_split": "V(L, lambda x: x.chunk(2, -1), X(L, 3, 4, 5), in_dims=1)",
    "unbind": "V(L, lambda x: x.unbind(-1), X(L, 3, 4, 2), in_dims=0)",
    "any_all": "V(L, lambda x: ((x > 0).any(-1), (x > 0).all()), X(L, 3, 4, 5), in_dims=1)",
    "count_nonzero": "V(L, lambda x: L.count_nonzero(x > 0, -1), X(L, 3, 4, 5), in_dims=2)",
    "isin_int": "V(L, lambda x: x.float().mean(0), L.t(ri(4,3,4)))",
    "dot": "V(L, lambda x, y: L.dot(x, y), X(L, 3, 4), X(L, 4), in_dims=(0, None))",
    "baddbmm": "V(L, lambda c, a, b: L.baddbmm(c, a, b, beta=0.5), X(L, 2, 3), X(L, 4, 2, 2, 5), X(L, 2, 5, 3), in_dims=(None, 0, None))",
    "addmm": "V(L, lambda c, a, b: L.addmm(c, a, b), X(L, 3, 2, 3), X(L, 2, 5), X(L, 5, 3), in_dims=(0, None, None))",
    "linalg_solve": "V(L, lambda a, b: L.linalg.solve(a, b), L.t(rn(3,3,3) + 3*np.eye(3)), X(L, 3), in_dims=(0, None))",
    "det": "V(L, lambda a: L.linalg.det(a), X(L, 4, 3, 3), in_dims=0)",
    "inv": "V(L, lambda a: L.linalg.inv(a), L.t(rn(3,4,3) + np.eye(3)[:,None]*3), in_dims=1)",
    "batch0": "V(L, lambda x: x.sum(0), L.zeros(0, 3))",
    "batch1_nested": "V(L, lambda x: x * 2, L.zeros(1, 3), in_dims=-2)",
    "size_numel_dim": "V(L, lambda x: x * (x.numel() + x.dim() + x.size(-1) + len(x)), X(L, 3, 4, 5), in_dims=2)",
    "view_transposed": "V(L, lambda x: x.view(-1), X(L, 4, 3).T, in_dims=0)",
    "reshape_in1": "V(L, lambda x: x.reshape(2, 3), X(L, 3, 4, 2), in_dims=1)",
    "mT": "V(L, lambda x: x.mT @ x, X(L, 3, 4, 2), in_dims=1)",
    "factory_shape": "V(L, lambda x: L.zeros(x.shape, dtype=x.dtype) + x.sum(), X(L, 3, 4))",
    "new_tensor": "V(L, lambda x: x + x.new_tensor([1., 2., 3., 4.]), X(L, 3, 4))",
    "tensor_inside": "V(L, lambda x: x * L.tensor(2.), X(L, 3, 4))",
    "int_ops": "V(L, lambda x: (x // 3, x % 3, x & 5, x >> 1, -x // 2), L.t(ri(11, 3, 4) - 5))",
    "int_div": 'V(L, lambda x, y: (x / y, L.div(x, y, rounding_mode="floor"), L.fmod(x, y)), L.t(ri(11, 3, 4) - 5), L.t(ri(4, 4) + 1), in_dims=(0, None))',
    "compare": "V(L, lambda x, y: (x == y, x.isclose(y), L.maximum(x, y), L.eq(x, 0)), X(L, 3, 4), X(L, 4), in_dims=(0, None))",
    "sum_dtype": "V(L, lambda x: x.sum(-1, dtype=L.float32), L.t(ri(5, 3, 4)))",
    "bool_sum": "V(L, lambda x: (x > 0).sum(0), X(L, 3, 4, 5), in_dims=2)",
    "mean_int_err": "V(L, lambda x: x.mean(), L.t(ri(5, 3, 4)))",
    "masked_select_err": "V(L, lambda x: x[x > 0], X(L, 3, 4))",
    "bool_idx_unbatched_mask": "V(L, lambda x, m: x[m], X(L, 3, 4), L.t(np.array([True, False, True, True])), in_dims=(0, None))",
    "einsum_diag": 'V(L, lambda x: L.einsum("ii->i", x), X(L, 3, 3, 3), in_dims=1)',
    "einsum_3": 'V(L, lambda a, b, c: L.einsum("ij,jk,k->i", a, b, c), X(L, 3, 2, 4), X(L, 4, 5), X(L, 3, 5), in_dims=(0, None, 0))',
    "tensordot": "V(L, lambda a, b: L.tensordot(a, b, dims=([1], [0])), X(L, 3, 2, 4), X(L, 4, 5), in_dims=(0, None))",
    "conv_t": "V(L, lambda x, w: L.F.conv_transpose2d(x, w, stride=2, padding=1), X(L, 2, 1, 2, 3, 3), X(L, 2, 3, 3, 3), in_dims=(0, None))",
    "conv_groups": "V(L, lambda x, w: L.F.conv2d(x, w, groups=2), X(L, 2, 1, 4, 4, 4), X(L, 2, 6, 2, 3, 3), in_dims=(0, 0))",
    "F_unfold": "V(L, lambda x: L.F.unfold(x, 2), X(L, 2, 1, 2, 3, 3), in_dims=0)",
    "losses": 'V(L, lambda x, y: (L.F.mse_loss(x, y), L.F.l1_loss(x, y, reduction="sum"), L.F.smooth_l1_loss(x, y, beta=0.5), L.F.huber_loss(x, y), L.F.binary_cross_entropy_with_logits(x, y.sigmoid(), pos_weight=y.abs())), X(L, 3, 4), X(L, 4), in_dims=(0, None))',
    "kl_nll_w": 'V(L, lambda x, y, w: (L.F.kl_div(x.log_softmax(-1), y.softmax(-1), reduction="batchmean"), L.F.nll_loss(x.log_softmax(-1), L.t(np.array([1, 0])), weight=w)), X(L, 3, 2, 4), X(L, 3, 2, 4), L.t(np.abs(rn(4))), in_dims=(0, 0, None))',
    "normalize_cos": "V(L, lambda x, y: (L.F.normalize(x, dim=-1), L.F.cosine_similarity(x, y, dim=-1), L.F.pairwise_distance(x, y)), X(L, 3, 2, 4), X(L, 2, 4), in_dims=(0, None))",
    "activations": 'V(L, lambda x: (L.F.gelu(x, approximate="tanh"), L.F.silu(x), L.F.softplus(x, beta=2, threshold=1), L.F.hardtanh(x, -0.5, 0.5), L.F.elu(x), L.F.leaky_relu(x, 0.2), L.F.glu(x, -1), L.F.mish(x), L.F.logsigmoid(x)), X(L, 3, 2, 4), in_dims=2)',
    "prelu": "V(L, lambda x, w: L.F.prelu(x, w), X(L, 3, 2, 4), X(L, 3, 4), in_dims=(0, 0))",
    "meshgrid_cart": 'V(L, lambda x: L.meshgrid(x, x[:2], indexing="ij")[1] * L.cartesian_prod(x[:2], x[:2]).sum(), X(L, 3, 4))',
    "block_diag": "V(L, lambda x: L.block_diag(x[:2, :2], x[2:, 2:]), X(L, 2, 4, 4))",
    "qr_eigh_svd": "V(L, lambda a: (L.linalg.qr(a).R.abs(), L.linalg.eigvalsh(a + a.mT), L.linalg.svdvals(a)), X(L, 3, 3, 3))",
    "lstsq": "V(L, lambda a, b: L.linalg.lstsq(a, b).solution, X(L, 2, 4, 3), X(L, 4, 2), in_dims=(0, None))",
    "cholesky_solve": "V(L, lambda a, b: L.cholesky_solve(b, L.linalg.cholesky(a @ a.mT + L.eye(3, dtype=a.dtype))), X(L, 2, 3, 3), X(L, 3, 1), in_dims=(0, None))",
    "triangular_solve": "V(L, lambda a, b: L.linalg.solve_triangular(a.triu() + 3 * L.eye(3, dtype=a.dtype), b, upper=True), X(L, 2, 3, 3), X(L, 3, 2), in_dims=(0, None))",
    "matrix_exp_power": "V(L, lambda a: (L.linalg.matrix_exp(a * 0.1), L.linalg.matrix_power(a, 3)), X(L, 2, 3, 3))",
    "bn_eval": "V(L, lambda x, m, v: L.F.batch_norm(x, m, v, training=False), X(L, 3, 2, 4), X(L, 4), L.t(np.abs(rn(4))), in_dims=(0, None, None))",
    "bn_train_err": "V(L, lambda x, m, v: L.F.batch_norm(x, m, v, training=True), X(L, 3, 2, 4), X(L, 4), L.t(np.abs(rn(4))), in_dims=(0, None, None))",
    "bn_train_nostats": "V(L, lambda x: L.F.batch_norm(x, None, None, training=True), X(L, 3, 2, 4), in_dims=0)",
    "instance_norm": "V(L, lambda x: L.F.instance_norm(x), X(L, 3, 2, 4, 5), in_dims=0)",
    "sdpa": "V(L, lambda q, k: L.F.scaled_dot_product_attention(q, k, k, is_causal=True), X(L, 2, 1, 3, 4), X(L, 1, 3, 4), in_dims=(0, None))",
    "sdpa_mask": "V(L, lambda q, m: L.F.scaled_dot_product_attention(q, q, q, attn_mask=m), X(L, 2, 1, 3, 4), L.t(rn(2, 3, 3) > 0), in_dims=(0, 0))",
    "mha": "(L.manual_seed(0), (lambda m: V(L, lambda x: m(x, x, x)[0], X(L, 2, 3, 4).float()))(L.nn.MultiheadAttention(4, 2, batch_first=True)))[1]",
    "embedding_bag": 'V(L, lambda j, w: L.F.embedding_bag(j, w, mode="mean"), L.t(ri(5, 3, 2, 4)), X(L, 5, 2), in_dims=(0, None))',
    "grid_sample": "V(L, lambda x, g: L.F.grid_sample(x, g, align_corners=False), X(L, 2, 1, 1, 3, 3), L.t(rn(2, 1, 2, 2, 2) * 0.9), in_dims=(0, 0))",
    "pixel_shuffle": "V(L, lambda x: L.F.pixel_shuffle(x, 2), X(L, 2, 1, 4, 2, 2))",
    "adaptive_pool": "V(L, lambda x: (L.F.adaptive_avg_pool2d(x, (2, 3)), L.F.adaptive_max_pool1d(x[0], 2)), X(L, 2, 1, 2, 5, 5))",
    "maxpool_idx": "V(L, lambda x: L.F.max_pool2d(x, 2, return_indices=True)[1], X(L, 2, 1, 2, 4, 4))",
    "dict_out_dims": 'V(L, lambda x: {"a": x, "b": (x.sum(), x * 2)}, X(L, 3, 4), out_dims={"a": 1, "b": (0, -1)})',
    "kwargs_unbatched": "L.func.vmap(lambda x, *, s: x * s)(X(L, 3, 4), s=X(L, 4))",
    "returns_input": "V(L, lambda x: x, X(L, 3, 4), in_dims=1, out_dims=1)",
    "returns_none_out": "V(L, lambda x: (x, None), X(L, 3, 4))",
    "nested_in_dims_inner_none": "L.func.vmap(lambda x, y: L.func.vmap(lambda a: a * y, in_dims=1)(x), in_dims=(0, 0))(X(L, 2, 3, 4), X(L, 2, 3))",
    "nested_3": "L.func.vmap(L.func.vmap(L.func.vmap(lambda a, b: a @ b, in_dims=(None, 0)), in_dims=(0, None)), in_dims=(1, 2))(X(L, 2, 3, 4), X(L, 2, 4, 3))",
    "inplace_inner_into_outer_err": "L.func.vmap(lambda a: L.func.vmap(lambda b: a.add_(b))(X(L, 3, 4)))(X(L, 2, 4).clone())",
    "inplace_into_view_of_captured": "(lambda base: (L.func.vmap(lambda x: (base[0].add_(x.sum() * 0 + 1), x)[1])(X(L, 3, 4)), base))(L.zeros(2, 3, dtype=L.float64))",
}

TRANSFORMS = {
    "grad_argnums_tuple": "L.func.grad(lambda x, y: (x * y.sin()).sum(), argnums=(0, 1))(X(L, 3), X(L, 3))",
    "grad_neg_argnum": "L.func.grad(lambda x, y: (x * y.exp()).sum(), argnums=-1)(X(L, 3), X(L, 3))",
    "grad_aux": 'L.func.grad(lambda x: ((x ** 3).sum(), {"a": x * 2}), has_aux=True)(X(L, 3))',
    "grad_and_value": "L.func.grad_and_value(lambda x: (x.tanh() ** 2).sum())(X(L, 3, 2))",
    "grad_dict_in": 'L.func.grad(lambda d: (d["w"] @ d["b"]).sum())({"w": X(L, 2, 3), "b": X(L, 3)})',
    "grad_nonscalar_err": "L.func.grad(lambda x: x * 2)(X(L, 3))",
    "grad_int_err": "L.func.grad(lambda x: x.sum())(L.t(ri(3,3)))",
    "grad_unused": "L.func.grad(lambda x, y: x.sum(), argnums=(0, 1))(X(L, 3), X(L, 2))",
    "grad_grad": "L.func.grad(L.func.grad(lambda x: x.sin() * x ** 2))(L.t(np.array(0.7)))",
    "grad_inplace_inside": "L.func.grad(lambda x: (x.clone().mul_(x).add_(1).log()).sum())(X(L, 4))",
    "grad_view_inplace": "L.func.grad(lambda x: (lambda y: (y[1:].mul_(x[:-1]), y.pow(2).sum())[1])(x.clone()))(X(L, 4))",
    "grad_outside_capture": "(lambda y: L.func.grad(lambda x: (x * y).sum())(X(L, 3)))(L.t(rn(3), rg=True))",
    "grad_of_closure_rg": "(lambda y: L.autograd.grad(L.func.grad(lambda x: (x * y).pow(2).sum())(X(L, 3)).sum(), y))(L.t(rn(3), rg=True))",
    "vjp_multi": "(lambda o, fn: (o, fn((X(L, 3), X(L, 2, 3)))))(*L.func.vjp(lambda x, y: (x.exp(), y * x), X(L, 3), X(L, 2, 3)))",
    "vjp_aux": "(lambda o, fn, a: (o, fn(X(L, 3)), a))(*L.func.vjp(lambda x: (x.exp(), x.sum()), X(L, 3), has_aux=True))",
    "vjp_wrong_shape": "L.func.vjp(lambda x: x.exp(), X(L, 3))[1](X(L, 4))",
    "jvp_basic": "L.func.jvp(lambda x, y: x.sin() * y, (X(L, 3), X(L, 3)), (X(L, 3), L.t(rn(2)[:1].repeat(3))))",
    "jvp_inplace": "L.func.jvp(lambda x: x.clone().mul_(x).sin_(), (X(L, 3),), (X(L, 3),))",
    "jvp_view_inplace": "L.func.jvp(lambda x: (lambda y: (y[0].mul_(x[1]), y)[1])(x.clone()), (X(L, 3, 2),), (X(L, 3, 2),))",
    "jvp_aux": "L.func.jvp(lambda x: (x.exp(), x * 2), (X(L, 3),), (X(L, 3),), has_aux=True)",
    "jvp_tuple_out": "L.func.jvp(lambda x: (x.cos(), [x.sum()]), (X(L, 3),), (X(L, 3),))",
    "jvp_shape_err": "L.func.jvp(lambda x: x.exp(), (X(L, 3),), (X(L, 4),))",
    "jvp_nontuple_err": "L.func.jvp(lambda x: x.exp(), X(L, 3), X(L, 3))",
    "jvp_int_out": "L.func.jvp(lambda x: (x > 0).long() + 0, (X(L, 3),), (X(L, 3),))",
    "jvp_sort": "L.func.jvp(lambda x: x.sort().values, (X(L, 5),), (X(L, 5),))",
    "jvp_max": "L.func.jvp(lambda x: x.max(0).values, (X(L, 3, 4),), (X(L, 3, 4),))",
    "jvp_gather": "L.func.jvp(lambda x: x.gather(1, L.t(ri(4,3,2))), (X(L, 3, 4),), (X(L, 3, 4),))",
    "jvp_index_put": "L.func.jvp(lambda x: x.index_put((L.t(np.array([0, 0])),), x[1:3], accumulate=True), (X(L, 3, 4),), (X(L, 3, 4),))",
    "jvp_cumprod": "L.func.jvp(lambda x: x.cumprod(0), (X(L, 4),), (X(L, 4),))",
    "jvp_norm": "L.func.jvp(lambda x: L.linalg.norm(x), (X(L, 3, 4),), (X(L, 3, 4),))",
    "jvp_softmax_ce": "L.func.jvp(lambda x: L.F.cross_entropy(x, L.t(ri(5,3)), label_smoothing=0.2), (X(L, 3, 5),), (X(L, 3, 5),))",
    "jvp_layer_norm": "L.func.jvp(lambda x, w: L.F.layer_norm(x, (4,), w), (X(L, 3, 4), X(L, 4)), (X(L, 3, 4), X(L, 4)))",
    "jvp_matmul": "L.func.jvp(lambda a, b: a @ b, (X(L, 2, 3, 4), X(L, 4, 5)), (X(L, 2, 3, 4), X(L, 4, 5)))",
    "jvp_conv": "L.func.jvp(lambda x, w: L.F.conv2d(x, w, padding=1), (X(L, 1, 2, 4, 4), X(L, 3, 2, 3, 3)), (X(L, 1, 2, 4, 4), X(L, 3, 2, 3, 3)))",
    "jvp_det_inv": "L.func.jvp(lambda a: (L.linalg.det(a), L.linalg.inv(a)), (L.t(rn(3,3)+3*np.eye(3)),), (X(L, 3, 3),))",
    "jvp_where": "L.func.jvp(lambda x, y: L.where(x > 0, x, y), (X(L, 4), X(L, 4)), (X(L, 4), X(L, 4)))",
    "jvp_complex": "L.func.jvp(lambda x: L.view_as_real(L.view_as_complex(x).exp()), (X(L, 3, 2),), (X(L, 3, 2),))",
    "jacrev_argnums": "L.func.jacrev(lambda x, y: (x[:, None] * y).sin(), argnums=(0, 1))(X(L, 3), X(L, 2))",
    "jacrev_aux": "L.func.jacrev(lambda x: (x.exp(), x.sum()), has_aux=True)(X(L, 3))",
    "jacrev_tuple_out": "L.func.jacrev(lambda x: (x.exp(), (x ** 2).sum()))(X(L, 3))",
    "jacrev_dict_in": 'L.func.jacrev(lambda d: d["a"] * d["b"].sum())({"a": X(L, 3), "b": X(L, 2, 2)})',
    "jacrev_chunk": "L.func.jacrev(lambda x: x.outer(x), chunk_size=2)(X(L, 3))",
    "jacrev_chunk1": "L.func.jacrev(lambda x: x.cumsum(0), chunk_size=1)(X(L, 4))",
    "jacrev_0d": "L.func.jacrev(lambda x: x ** 3)(L.t(np.array(1.3)))",
    "jacrev_int_err": "L.func.jacrev(lambda x: x * 2)(L.t(ri(3,3)))",
    "jacfwd_argnums": "L.func.jacfwd(lambda x, y: (x[:, None] * y).sin(), argnums=(0, 1))(X(L, 3), X(L, 2))",
    "jacfwd_aux": "L.func.jacfwd(lambda x: (x.exp(), x.sum()), has_aux=True)(X(L, 3))",
    "jacfwd_matrix": "L.func.jacfwd(lambda x: x @ x.T)(X(L, 2, 3))",
    "jacfwd_randomness": '(L.manual_seed(1), L.func.jacfwd(lambda x: x * 2, randomness="same")(X(L, 3)))[1]',
    "jacfwd_jacrev": "L.func.jacfwd(L.func.jacrev(rosenbrock))(X(L, 4))",
    "jacrev_jacrev": "L.func.jacrev(L.func.jacrev(lambda x: (x.sin() * x.roll(1)).sum()))(X(L, 4))",
    "hessian": "L.func.hessian(rosenbrock)(X(L, 4))",
    "hessian_argnums": "L.func.hessian(lambda x, y: (x.exp() * y.sum() ** 2).sum(), argnums=(0, 1))(X(L, 2), X(L, 3))",
    "hessian_softmax_ce": "L.func.hessian(lambda x: L.F.cross_entropy(x, L.t(ri(4,2))))(X(L, 2, 4))",
    "hessian_logsumexp_norm": "L.func.hessian(lambda x: x.logsumexp(0) + L.linalg.vector_norm(x))(X(L, 3))",
    "hessian_matrix_in": "L.func.hessian(lambda a: L.linalg.det(a))(L.t(rn(2,2)+np.eye(2)))",
    "hessian_layer_norm": "L.func.hessian(lambda x: L.F.layer_norm(x, (4,)).pow(3).sum())(X(L, 4))",
    "hessian_mlp_params": '(lambda m: L.func.hessian(lambda p: L.func.functional_call(m, p, (XF(L, 2, 3),)).pow(2).sum())({"2.bias": params(m)["2.bias"]}))(mlp(L))',
    "vmap_grad_per_sample": "(lambda m: L.func.vmap(L.func.grad(lambda p, x, y: L.F.cross_entropy(L.func.functional_call(m, p, (x[None],)), y[None])), in_dims=(None, 0, 0))(params(m), XF(L, 5, 3), L.t(ri(2,5))))(mlp(L))",
    "vmap_jacrev": "L.func.vmap(L.func.jacrev(lambda x: x.sin() * x.sum()))(X(L, 4, 3))",
    "vmap_hessian": "L.func.vmap(L.func.hessian(lambda x: (x.exp() * x.flip(0)).sum()))(X(L, 2, 3))",
    "vmap_jvp": "L.func.vmap(lambda x, t: L.func.jvp(lambda y: y.tanh().cumsum(0), (x,), (t,)))(X(L, 4, 3), X(L, 3, 4).T)",
    "grad_vmap": "L.func.grad(lambda w: L.func.vmap(lambda x: (x @ w).tanh().sum())(X(L, 4, 3)).sum())(X(L, 3, 2))",
    "vmap_vjp": "L.func.vmap(lambda x, g: L.func.vjp(lambda y: y.exp().cumprod(0), x)[1](g))(X(L, 4, 3), X(L, 3, 4).T)",
    "vmap_grad_in_dims1": "L.func.vmap(L.func.grad(lambda x, w: (x * w).sin().sum(), argnums=1), in_dims=(1, None))(X(L, 3, 4), X(L, 3))",
    "vmap_grad_outdims1": "L.func.vmap(L.func.grad(lambda x: (x ** 3).sum()), out_dims=1)(X(L, 4, 3))",
    "fwd_make_dual_view": "fw(L, lambda d: d[1:].T * 2, X(L, 3, 2), X(L, 3, 2))",
    "fwd_inplace_dual": "fw(L, lambda d: (lambda y: (y.mul_(d), y.exp_())[1])(d.clone()), X(L, 3), X(L, 3))",
    "fwd_view_inplace_base": "fw(L, lambda d: (lambda y: (y[1:].add_(d[:2]), y)[1])(L.zeros(3)), X(L, 3), X(L, 3))",
    "fwd_view_of_dual_inplace": "fw(L, lambda d: (lambda y: (y[:, 0].mul_(3), y)[1])(d.clone()), X(L, 3, 2), X(L, 3, 2))",
    "fwd_setitem_dual": "fw(L, lambda d: (lambda y: (y.__setitem__(L.t(np.array([0,2])), d[1:] ** 2), y)[1])(L.ones(3, 2, dtype=L.float64)), X(L, 3, 2), X(L, 3, 2))",
    "fwd_reductions": "fw(L, lambda d: (d.amax(0), d.std(1), d.median(), d.prod(), d.var(0, correction=2)), X(L, 3, 4), X(L, 3, 4))",
    "fwd_amax_ties": "fw(L, lambda d: (d.amax(), d.max(), d.amin(0)), L.t(np.array([[1., 3., 3.], [0., 3., 1.]])), X(L, 2, 3))",
    "fwd_clamp_boundary": "fw(L, lambda d: (d.clamp(0, 1), d.relu(), d.abs()), L.t(np.array([0., 1., -1., 0.5])), X(L, 4))",
    "fwd_pow_zero": "fw(L, lambda d: (d ** 2, d ** 0.5, d ** 0), L.t(np.array([0., 1., 4.])), X(L, 3))",
    "fwd_linalg": "fw(L, lambda d: (L.linalg.solve(d, X(L, 3)), L.linalg.slogdet(d).logabsdet, L.linalg.cholesky(d @ d.T + L.eye(3, dtype=L.float64))), L.t(rn(3,3)+3*np.eye(3)), X(L, 3, 3))",
    "fwd_eigh": "fw(L, lambda d: L.linalg.eigvalsh(d + d.T), X(L, 3, 3), X(L, 3, 3))",
    "fwd_complex_abs": "fw(L, lambda d: L.view_as_complex(d).abs(), X(L, 3, 2), X(L, 3, 2))",
    "fwd_dtype_cast": "fw(L, lambda d: d.float().double() * 2, X(L, 3), X(L, 3))",
    "fwd_tangent_f32_into_f64": 'fw(L, lambda d: d * 2, X(L, 3), L.t(rn(3), dtype="float32"))',
    "fwd_make_dual_shape_err": "fw(L, lambda d: d, X(L, 3), X(L, 2))",
    "fwd_make_dual_int_err": "fw(L, lambda d: d, L.t(ri(3,3)), L.t(ri(3,3)))",
    "fwd_nested_levels": "level(L, lambda: L.fw.unpack_dual(L.fw.make_dual(X(L, 3), X(L, 3)) * 2).tangent)",
    "fwd_backward_through": "(lambda x: level(L, lambda: L.autograd.grad(L.fw.unpack_dual(L.fw.make_dual(x, X(L, 3)).sin() ** 2).tangent.sum(), x)))(L.t(rn(3), rg=True))",
    "fwd_sdpa": "fw(L, lambda d: L.F.scaled_dot_product_attention(d, d, d, is_causal=True), X(L, 1, 3, 2), X(L, 1, 3, 2))",
    "fwd_cumsum_flip": "fw(L, lambda d: d.cumsum(1).flip(0).logcumsumexp(1), X(L, 3, 2), X(L, 3, 2))",
    "fwd_embedding": "fw(L, lambda d: L.F.embedding(L.t(ri(4,3)), d), X(L, 4, 2), X(L, 4, 2))",
    "fwd_maxpool": "fw(L, lambda d: L.F.max_pool1d(d, 2), X(L, 1, 2, 4), X(L, 1, 2, 4))",
    "fwd_interp_bilinear": 'fw(L, lambda d: L.F.interpolate(d, size=(3, 5), mode="bilinear", align_corners=False), X(L, 1, 1, 2, 3), X(L, 1, 1, 2, 3))',
    "fwd_unpack_view_tangent_no_level": "((lambda: (lambda d: (L.fw.unpack_dual(d.T).tangent, L.fw.unpack_dual(d[0]).tangent))(L.fw.make_dual(X(L, 3, 2), X(L, 2, 3).T))))()",
    "grad_closure": "closure(L, lambda x, y: [L.func.grad(lambda x: (x * y).pow(2).sum())(x)])",
    "grad_closure_plus": "closure(L, lambda x, y: [L.func.grad(lambda x: (x * y).pow(2).sum())(x) + y])",
    "vjp_closure": "closure(L, lambda x, y: list(L.func.vjp(lambda x: (x * y).sin(), x)[1](x)))",
    "vjp_closure_val": "closure(L, lambda x, y: [L.func.vjp(lambda x: (x * y).sin(), x)[0]])",
    "jacrev_closure": "closure(L, lambda x, y: [L.func.jacrev(lambda x: (x * y).sin())(x)])",
    "jvp_closure": "closure(L, lambda x, y: list(L.func.jvp(lambda x: (x * y).sin(), (x,), (x,))))",
    "jacfwd_closure": "closure(L, lambda x, y: [L.func.jacfwd(lambda x: (x * y).sin())(x)])",
    "hessian_closure": "closure(L, lambda x, y: [L.func.hessian(lambda x: (x * y).sin().sum())(x)])",
    "vmap_grad_closure": "closure(L, lambda x, y: [L.func.vmap(L.func.grad(lambda x: (x * y).pow(3).sum()))(X(L, 2, 3))])",
    "grad_value_closure": "closure(L, lambda x, y: list(L.func.grad_and_value(lambda x: (x * y).pow(2).sum())(x)))",
    "grad_module_param": "(lambda m: (lambda g: L.autograd.grad(g.pow(2).sum(), m.weight))(L.func.grad(lambda x: m(x).tanh().sum())(XF(L, 2, 3))))(( L.manual_seed(0), L.nn.Linear(3, 2))[1])",
    "grad_closure_no_grad": "(lambda y: (L.set_grad_enabled(False), L.func.grad(lambda x: (x * y).pow(2).sum())(X(L, 3)).requires_grad, L.set_grad_enabled(True))[1])(L.t(rn(3), rg=True))",
    "grad_closure_requires_grad": "(lambda y: (lambda: (L.func.grad(lambda x: (x * y).pow(2).sum())(X(L, 3)).requires_grad))())(L.t(rn(3), rg=True))",
    "grad_aux_bad": "L.func.grad(lambda x: x.sum(), has_aux=True)(X(L, 3))",
    "vmap_grad_aux": "V(L, L.func.grad(lambda x: ((x ** 2).sum(), x.mean()), has_aux=True), X(L, 3, 4))",
    "jacrev_chunk_argnums": "L.func.jacrev(lambda x, y: x.outer(y).exp(), argnums=(0, 1), chunk_size=2)(X(L, 3), X(L, 2))",
    "jacrev_int_out": "L.func.jacrev(lambda x: (x > 0).long())(X(L, 3))",
    "jacfwd_int_out": "L.func.jacfwd(lambda x: (x > 0).float() * x)(X(L, 3))",
    "jacfwd_0d": "L.func.jacfwd(lambda x: x ** 2)(L.t(np.array(2.0)))",
    "jacfwd_dict_out": 'L.func.jacfwd(lambda x: {"a": x.sin(), "b": x.sum()})(X(L, 3))',
    "jacrev_dict_out": 'L.func.jacrev(lambda x: {"a": x.sin(), "b": x.sum()})(X(L, 3))',
    "jacrev_nested_in": "L.func.jacrev(lambda p: p[0] * p[1][0])((X(L, 3), [X(L, 3)]))",
    "hessian_argnums_tuple": "L.func.hessian(lambda x, y: (x * y.exp()).sum() * x.sum(), argnums=(0, 1))(X(L, 2), X(L, 2))",
    "vmap_hessian_argnums": "V(L, L.func.hessian(lambda x, y: (x * y.sin()).sum() ** 2, argnums=1), X(L, 3, 2), X(L, 2), in_dims=(0, None))",
    "jvp_vmap_inside": "L.func.jvp(lambda x: L.func.vmap(lambda r: r.softmax(0) @ r)(x), (X(L, 3, 4),), (X(L, 3, 4),))",
    "jacfwd_vmap_inside": "L.func.jacfwd(lambda x: L.func.vmap(lambda r: (r * x[0]).sum())(x))(X(L, 3, 2))",
    "grad_vmap_inside_outdims": "L.func.grad(lambda x: L.func.vmap(lambda r: r.cumsum(0), in_dims=1, out_dims=1)(x).pow(2).sum())(X(L, 3, 4))",
    "vjp_vmap_chunk": "L.func.vjp(lambda x: L.func.vmap(lambda r: r.exp().flip(0), chunk_size=2)(x), X(L, 5, 3))[1](X(L, 5, 3))",
    "linearize_vmap": "(lambda o, fn: (o, L.func.vmap(fn)(X(L, 2, 4))))(*L.func.linearize(lambda x: x.sin().cumsum(0), X(L, 4)))",
    "af_jacobian_vec_tuple_out": "L.AF.jacobian(lambda x, y: (x.outer(y), (x * 2).sum()), (X(L, 3), X(L, 2)), vectorize=True)",
    "af_hessian_vec_create": "(lambda x: (lambda H: L.autograd.grad(H.sum(), x))(L.AF.hessian(lambda z: (z.exp() * z.roll(1)).sum(), x, create_graph=True, vectorize=True)))(X(L, 3).requires_grad_())",
    "af_jacobian_fwd_nonvec_err": 'L.AF.jacobian(lambda x: x * 2, X(L, 3), strategy="forward-mode")',
    "af_jvp_create": "(lambda x: (lambda o: L.autograd.grad(o[1].sum(), x))(L.AF.jvp(lambda z: z.exp() * z, x, X(L, 3), create_graph=True)))(X(L, 3).requires_grad_())",
    "af_vhp_nonscalar_err": "L.AF.vhp(lambda z: z * 2, X(L, 3), X(L, 3))",
    "functional_call_vmap_in_dims_dict": '(lambda m: L.func.vmap(lambda p, x: L.func.functional_call(m, p, (x,)), in_dims=({"weight": 0, "bias": None}, None))({"weight": XF(L, 2, 2, 3), "bias": XF(L, 2)}, XF(L, 4, 3)))((L.manual_seed(0), L.nn.Linear(3, 2))[1])',
    "vmap_kwarg_tensor_unbatched": "L.func.vmap(lambda x, w=None: x @ w)(X(L, 3, 4), w=X(L, 4, 2))",
    "vmap_out_dims_list": "V(L, lambda x: [x, x.sum()], X(L, 3, 4), out_dims=[1, 0])",
    "vmap_inplace_out_alias": "(lambda x: (V(L, lambda r: r.mul_(2), x, in_dims=1), x))(X(L, 3, 4).clone())",
    "vmap_inplace_input_view": "(lambda x: (V(L, lambda r: r[1:].sub_(r[0]), x), x))(X(L, 3, 4).clone())",
    "vmap_setitem_input": "(lambda x: (V(L, lambda r: (r.__setitem__(0, r.sum()), r)[1], x), x))(X(L, 3, 4).clone())",
    "grad_inplace_on_input_err": "L.func.grad(lambda x: x.mul_(2).sum())(X(L, 3))",
    "vmap_grad_inplace_inside": "V(L, L.func.grad(lambda x: x.clone().mul_(x).sum()), X(L, 2, 3))",
    "vmap_bool_cond_err": "V(L, lambda x: x if x.sum() > 0 else -x, X(L, 3, 4))",
    "vmap_cat_mixed_dtype": "V(L, lambda x, y: L.cat([x, y]), L.t(ri(5, 3, 2)), X(L, 2), in_dims=(0, None))",
    "vmap_where_mixed_dtype": "V(L, lambda x, y: L.where(x > 2, x, y), L.t(ri(5, 3, 2)), X(L, 2).float(), in_dims=(0, None))",
    "vmap_scalar_tensor_promo": "V(L, lambda x, s: x * s, X(L, 3, 2).float(), L.t(np.array(2.5)), in_dims=(0, None))",
    "vmap_0d_batched_promo": "V(L, lambda s, x: x + s, L.t(np.array([1, 2, 3])), X(L, 2).float(), in_dims=(0, None))",
    "vmap_int_batched_vs_float_scalar": "V(L, lambda s, x: x * s, X(L, 3), L.t(ri(4, 2)), in_dims=(0, None))",
    "vmap_inplace_input_in1_chunked": "(lambda x: (V(L, lambda r: r[1:].add_(1), x, in_dims=1, chunk_size=3), x))(X(L, 3, 4).clone())",
    "vmap_nested_inplace_input": "(lambda x: (L.func.vmap(L.func.vmap(lambda r: r.mul_(2)), in_dims=1)(x), x))(X(L, 3, 4).clone())",
    "vmap_copy_unbatched_into_input": "(lambda x: (V(L, lambda r, c: r.copy_(c), x, L.t(np.array([7., 8., 9.])), in_dims=(1, None)), x))(X(L, 3, 4).clone())",
    "vmap_inplace_input_graph": "(lambda v: (lambda u: (V(L, lambda r: r.exp_(), u), L.autograd.grad(u.sum(), v)))(v * 1))(X(L, 3, 4).requires_grad_())",
    "vmap_inplace_saved_input_err": "(lambda v: (lambda u: (V(L, lambda r: r.mul_(r), u), L.autograd.grad(u.sum(), v)))(v * 1))(X(L, 3, 4).requires_grad_())",
    "vmap_inplace_leaf_err": "V(L, lambda r: r.mul_(2), X(L, 3, 4).requires_grad_())",
    "grad_int_out_zeros": "L.func.grad(lambda x: (x > 0).sum())(X(L, 3))",
    "grad_and_value_const": "L.func.grad_and_value(lambda x: (x > 0).sum().double())(X(L, 3))",
    "grad_const": "L.func.grad(lambda x: L.tensor(2.0))(X(L, 3))",
    "vjp_one_const_out": "L.func.vjp(lambda x: (x * 2, L.ones(2)), X(L, 3))[1]((X(L, 3), L.ones(2)))",
    "jacrev_one_const_out": "L.func.jacrev(lambda x: (x.sin(), L.ones(2, dtype=L.float64)))(X(L, 3))",
    "hessian_of_linear": "L.func.hessian(lambda x: x.sum())(X(L, 3))",
    "vmap_grad_const": "V(L, L.func.grad(lambda x: L.tensor(2.0) + 0 * x.detach().sum()), X(L, 2, 3))",
}

FUNCTIONAL = {
    "af_jacobian": "L.AF.jacobian(f2, (X(L, 3), X(L, 2)))",
    "af_jacobian_vec": "L.AF.jacobian(f2, (X(L, 3), X(L, 2)), vectorize=True)",
    "af_jacobian_fwd_vec": 'L.AF.jacobian(f2, (X(L, 3), X(L, 2)), vectorize=True, strategy="forward-mode")',
    "af_jacobian_single": "L.AF.jacobian(f1, X(L, 4), vectorize=True)",
    "af_jacobian_create": "(lambda x: (lambda J: L.autograd.grad(J.sum(), x))(L.AF.jacobian(f1, x, create_graph=True)))(L.t(rn(4), rg=True))",
    "af_jacobian_create_vec": "(lambda x: (lambda J: L.autograd.grad(J.sum(), x))(L.AF.jacobian(f1, x, create_graph=True, vectorize=True)))(L.t(rn(4), rg=True))",
    "af_jacobian_strict_err": "L.AF.jacobian(lambda x, y: x * 2, (X(L, 3), X(L, 2)), strict=True)",
    "af_jacobian_unused": "L.AF.jacobian(lambda x, y: x * 2, (X(L, 3), X(L, 2)))",
    "af_jacobian_unused_vec": "L.AF.jacobian(lambda x, y: x * 2, (X(L, 3), X(L, 2)), vectorize=True)",
    "af_jacobian_const_out": "L.AF.jacobian(lambda x: L.ones(2, dtype=L.float64), X(L, 3))",
    "af_jacobian_const_out_vec": "L.AF.jacobian(lambda x: L.ones(2, dtype=L.float64), X(L, 3), vectorize=True)",
    "af_hessian": "L.AF.hessian(s2, (X(L, 2), X(L, 3)))",
    "af_hessian_vec": "L.AF.hessian(s2, (X(L, 2), X(L, 3)), vectorize=True)",
    "af_hessian_fwd": 'L.AF.hessian(s1, X(L, 3), vectorize=True, outer_jacobian_strategy="forward-mode")',
    "af_hessian_create": "(lambda x: (lambda H: L.autograd.grad(H.sum(), x))(L.AF.hessian(s1, x, create_graph=True)))(L.t(rn(3), rg=True))",
    "af_hessian_linear_strict": "L.AF.hessian(lambda x: x.sum() * 2, X(L, 3), strict=True)",
    "af_hessian_linear": "L.AF.hessian(lambda x: x.sum() * 2, X(L, 3))",
    "af_hessian_linear_vec": "L.AF.hessian(lambda x: x.sum() * 2, X(L, 3), vectorize=True)",
    "af_vjp": "L.AF.vjp(f1, X(L, 4), X(L, 4))",
    "af_vjp_scalar_nov": "L.AF.vjp(s1, X(L, 3))",
    "af_vjp_nonscalar_nov_err": "L.AF.vjp(f1, X(L, 3))",
    "af_jvp": "L.AF.jvp(f2, (X(L, 3), X(L, 2)), (X(L, 3), X(L, 2)))",
    "af_jvp_strict": "L.AF.jvp(lambda x: x.detach() * 2, X(L, 3), X(L, 3), strict=True)",
    "af_jvp_nonstrict_indep": "L.AF.jvp(lambda x: L.ones(3, dtype=L.float64), X(L, 3), X(L, 3))",
    "af_hvp": "L.AF.hvp(s1, X(L, 3), X(L, 3))",
    "af_vhp": "L.AF.vhp(s2, (X(L, 2), X(L, 3)), (X(L, 2), X(L, 3)))",
    "af_hvp_create": "(lambda x: (lambda o: L.autograd.grad(o[1].sum(), x))(L.AF.hvp(s1, x, X(L, 3), create_graph=True)))(L.t(rn(3), rg=True))",
    "af_vjp_v_shape_err": "L.AF.vjp(f1, X(L, 4), X(L, 3))",
    "af_jacobian_int_out": "L.AF.jacobian(lambda x: (x > 0).long(), X(L, 3))",
    "fc_tied": '(lambda m: L.func.functional_call(m, {"a.weight": XF(L, 3, 3)}, (XF(L, 2, 3),)))(tied(L))',
    "fc_tied_false": '(lambda m: L.func.functional_call(m, {"a.weight": XF(L, 3, 3)}, (XF(L, 2, 3),), tie_weights=False))(tied(L))',
    "fc_tied_both_err": '(lambda m: L.func.functional_call(m, {"a.weight": XF(L, 3, 3), "b.weight": XF(L, 3, 3)*2}, (XF(L, 2, 3),)))(tied(L))',
    "fc_tied_both_same": '(lambda m, w: L.func.functional_call(m, {"a.weight": w, "b.weight": w}, (XF(L, 2, 3),)))(tied(L), XF(L, 3, 3))',
    "fc_buffer": '(lambda m: L.func.functional_call(m, {"buf": XF(L, 3)}, (XF(L, 2, 3),)))(tied(L))',
    "fc_tuple_dicts": '(lambda m: L.func.functional_call(m, ({"a.weight": XF(L, 3, 3)}, {"buf": L.zeros(3)}), (XF(L, 2, 3),)))(tied(L))',
    "fc_tuple_dup_err": '(lambda m: L.func.functional_call(m, ({"buf": XF(L, 3, 3)}, {"buf": L.zeros(3)}), (XF(L, 2, 3),)))(tied(L))',
    "fc_strict_missing": '(lambda m: L.func.functional_call(m, {"a.weight": XF(L, 3, 3)}, (XF(L, 2, 3),), strict=True))(tied(L))',
    "fc_unexpected": '(lambda m: L.func.functional_call(m, {"zzz": XF(L, 3, 3)}, (XF(L, 2, 3),)))(tied(L))',
    "fc_unexpected_strict": '(lambda m: L.func.functional_call(m, {"zzz": XF(L, 3, 3)}, (XF(L, 2, 3),), strict=True))(tied(L))',
    "fc_restores": '(lambda m: (L.func.functional_call(m, {"a.weight": L.zeros(3,3)}, (XF(L, 2, 3),)), m.a.weight, m.b.weight is m.a.weight))(tied(L))',
    "fc_kwargs": '(lambda m: L.func.functional_call(m, {}, (), {"x": XF(L, 2, 3)}))(tied(L))',
    "fc_bn_buffers_updated": '(lambda m, rm: (L.func.functional_call(m, {"1.running_mean": rm}, (XF(L, 2, 3),)), rm, m[1].running_mean, m[1].num_batches_tracked))(bn(L), L.zeros(3))',
    "fc_grad_tied": '(lambda m: L.func.grad(lambda p: L.func.functional_call(m, p, (XF(L, 2, 3),)).pow(2).sum())({"a.weight": XF(L, 3, 3)}))(tied(L))',
    "stack_module_state": "(lambda ms: L.func.stack_module_state(ms))([(L.manual_seed(k), L.nn.Linear(2, 2))[1] for k in range(3)])",
    "ensemble_vmap": "(lambda ms: (lambda p, b: L.func.vmap(lambda p, b, x: L.func.functional_call(ms[0], (p, b), (x,)), in_dims=(0, 0, None))(p, b, XF(L, 2, 3)[:, :2]))(*L.func.stack_module_state(ms)))([(L.manual_seed(k), L.nn.Linear(2, 2))[1] for k in range(3)])",
    "linearize": "(lambda o, fn: (o, fn(X(L, 4)), fn(X(L, 4) * 2)))(*L.func.linearize(f1, X(L, 4)))",
    "vmap_rand_different": '(L.manual_seed(3), L.func.vmap(lambda x: x + L.rand(2), randomness="different")(XF(L, 3, 2)))[1]',
    "vmap_rand_same": '(L.manual_seed(3), L.func.vmap(lambda x: x + L.rand(2), randomness="same")(XF(L, 3, 2)))[1]',
    "vmap_dropout_different": '(L.manual_seed(3), L.func.vmap(lambda x: L.F.dropout(x, 0.5), randomness="different")(L.ones(3, 4)))[1]',
    "vmap_bernoulli_different": '(L.manual_seed(3), L.func.vmap(lambda p: L.bernoulli(p), randomness="different")(L.full((3, 4), 0.5)))[1]',
    "vmap_nested_rand": '(L.manual_seed(3), L.func.vmap(L.func.vmap(lambda x: x + L.rand(()), randomness="different"), randomness="same")(L.ones(2, 3)))[1]',
    "vmap_normal_tensor_mean": '(L.manual_seed(3), L.func.vmap(lambda m: L.normal(m, 1.0), randomness="different")(XF(L, 3, 2)))[1]',
    "vmap_randint_different": '(L.manual_seed(3), L.func.vmap(lambda x: x + L.randint(0, 10, (2,)), randomness="different")(L.t(ri(5,3,2))))[1]',
    "vmap_multinomial": '(L.manual_seed(3), L.func.vmap(lambda p: L.multinomial(p, 2), randomness="different")(L.t(np.abs(rn(3,4))).float()))[1]',
    "vmap_randperm": '(L.manual_seed(3), L.func.vmap(lambda x: x[L.randperm(4)], randomness="different")(XF(L, 3, 4)))[1]',
    "vmap_inplace_rand": '(L.manual_seed(3), L.func.vmap(lambda x: x.clone().uniform_(), randomness="different")(XF(L, 3, 4)))[1]',
}

FORWARD_AD = {
    "base_after_view_write": "dual(L, lambda: written_through_views(L))",
    "dual_of_view": "dual(L, lambda: dual_of_view(L))",
    "view_then_base_inplace": "dual(L, lambda: base_written_after_view(L))",
    "write_dual_into_dual_view": "dual(L, lambda: duals_written_into_dual(L))",
    "grad_of_tangent": "grad_of_tangent(L, X(L, 3, 2))",
    "make_dual_noncontig_tangent": "dual(L, lambda: L.fw.make_dual(X(L, 3, 2), X(L, 2, 3).T) * 2)",
    "tangent_layout": "dual(L, lambda: L.tensor(list(L.fw.unpack_dual(L.fw.make_dual(X(L, 3, 2), X(L, 2, 3).T)).tangent.stride())))",
    "make_dual_requires_grad_primal": "dual(L, lambda: (lambda x: (L.fw.make_dual(x, X(L, 3)).pow(2), )) (X(L, 3).requires_grad_()))",
    "tangent_int_op": "dual(L, lambda: (L.fw.make_dual(X(L, 3), X(L, 3)) > 0, L.fw.make_dual(X(L, 3), X(L, 3)).argmax()))",
    "dual_to_float32": "dual(L, lambda: L.fw.make_dual(X(L, 3), X(L, 3)).float())",
    "dual_complex": "dual(L, lambda: (lambda z: (z * z.conj()).real + z.angle())(L.view_as_complex(L.fw.make_dual(X(L, 3, 2), X(L, 3, 2)))))",
    "dual_setitem_scalar": "dual(L, lambda: (lambda y: (y.__setitem__(0, 5.0), y)[1])(L.fw.make_dual(X(L, 3), X(L, 3)).clone()))",
    "dual_index_put_plain": "dual(L, lambda: (lambda y: (y.index_put_((L.t(np.array([0, 0])),), L.fw.make_dual(X(L, 2), X(L, 2)), accumulate=True), y)[1])(L.zeros(3, dtype=L.float64)))",
    "dual_resize_as_err": "dual(L, lambda: L.fw.make_dual(X(L, 3), X(L, 3)).sum().backward())",
    "dual_masked_scatter": "dual(L, lambda: L.fw.make_dual(X(L, 4), X(L, 4)).masked_scatter(L.t(np.array([True, False, True, False])), L.fw.make_dual(X(L, 3), X(L, 3))))",
    "dual_unfold_fold": "dual(L, lambda: L.F.fold(L.F.unfold(L.fw.make_dual(X(L, 1, 1, 3, 3), X(L, 1, 1, 3, 3)), 2), (3, 3), 2))",
    "dual_cumsum_rev": "dual(L, lambda: L.fw.make_dual(X(L, 3, 4), X(L, 3, 4)).flip(1).cumsum(1).flip(1))",
    "dual_linalg_eig": "dual(L, lambda: L.linalg.eigh(L.fw.make_dual(X(L, 3, 3), X(L, 3, 3)) + L.fw.make_dual(X(L, 3, 3), X(L, 3, 3)).mT).eigenvalues)",
    "dual_svd": "dual(L, lambda: L.linalg.svdvals(L.fw.make_dual(X(L, 3, 2), X(L, 3, 2))))",
    "dual_qr": "dual(L, lambda: L.linalg.qr(L.fw.make_dual(X(L, 3, 2), X(L, 3, 2))).R)",
    "dual_std_unbiased_1": "dual(L, lambda: L.fw.make_dual(X(L, 1), X(L, 1)).std())",
    "dual_norm_zero": "dual(L, lambda: L.fw.make_dual(L.zeros(3, dtype=L.float64), X(L, 3)).norm())",
    "dual_max_ties_tangent": "dual(L, lambda: L.fw.make_dual(L.t(np.array([2., 2., 1.])), L.t(np.array([1., 3., 5.]))).max())",
    "dual_amax_ties_tangent": "dual(L, lambda: L.fw.make_dual(L.t(np.array([2., 2., 1.])), L.t(np.array([1., 3., 5.]))).amax())",
    "dual_max_dim_ties": "dual(L, lambda: L.fw.make_dual(L.t(np.array([[2., 2.], [1., 0.]])), L.t(np.array([[1., 3.], [5., 7.]]))).max(1).values)",
    "dual_median_even": "dual(L, lambda: L.fw.make_dual(L.t(np.array([2., 2., 1., 4.])), L.t(np.array([1., 3., 5., 7.]))).median())",
    "dual_sort_ties": "dual(L, lambda: L.fw.make_dual(L.t(np.array([2., 1., 2., 1.])), L.t(np.array([1., 3., 5., 7.]))).sort(stable=True).values)",
    "dual_clamp_tensor_bounds": "dual(L, lambda: L.fw.make_dual(L.t(np.array([0., 1., 2.])), X(L, 3)).clamp(L.fw.make_dual(L.t(np.array([0., 0., 0.])), X(L, 3) * 3), L.t(np.array([1., 1., 1.]))))",
    "dual_min_max_binary_tie": "dual(L, lambda: (L.maximum(L.fw.make_dual(L.t(np.array([1., 2.])), L.t(np.array([1., 1.]))), L.t(np.array([1., 0.]))), L.fmin(L.fw.make_dual(L.t(np.array([1., 2.])), L.t(np.array([1., 1.]))), L.fw.make_dual(L.t(np.array([1., 3.])), L.t(np.array([4., 4.]))))))",
    "dual_where_scalar": "dual(L, lambda: L.where(L.t(np.array([True, False])), L.fw.make_dual(X(L, 2), X(L, 2)), 2.0))",
    "dual_abs_zero": "dual(L, lambda: (L.fw.make_dual(L.zeros(2, dtype=L.float64), L.t(np.array([1., -1.]))).abs(), L.fw.make_dual(L.zeros(2, dtype=L.float64), L.t(np.array([1., -1.]))).sgn()))",
    "dual_sqrt_zero": "dual(L, lambda: L.fw.make_dual(L.zeros(2, dtype=L.float64), L.t(np.array([1., 0.]))).sqrt())",
    "custom_function": "custom_function(L)",
    "grad_of_tangent_transposed": "grad_of_tangent(L, X(L, 2, 3).T)",
    "tangent_copied_not_aliased": "(lambda t: dual(L, lambda: (lambda dd: (t.mul_(2), dd)[1])(L.fw.make_dual(X(L, 3, 2), t))))(X(L, 2, 3).T)",
    "tangent_offset_copied": "(lambda t: dual(L, lambda: (lambda dd: (t.mul_(2), dd)[1])(L.fw.make_dual(X(L, 3, 2), t))))(X(L, 4, 2)[1:])",
    "tangent_same_layout_aliased": "(lambda t: dual(L, lambda: (lambda dd: (t.mul_(2), dd)[1])(L.fw.make_dual(X(L, 3, 2), t))))(X(L, 3, 2))",
}

RANDOM = {
    "dropout_in1": "rnd(L, lambda x: L.F.dropout(x, 0.4), L.ones(3, 4, 2), in_dims=1)",
    "rand_like_in0": "rnd(L, lambda x: L.rand_like(x), L.ones(3, 4), in_dims=0)",
    "randn_like_unbatched": "rnd(L, lambda x, y: L.randn_like(y) + x, L.ones(3, 4), L.ones(4), in_dims=(0, None))",
    "bernoulli_p_in1": "rnd(L, lambda p: L.bernoulli(p), L.full((4, 3), 0.5), in_dims=1)",
    "dropout2d": "rnd(L, lambda x: L.F.dropout2d(x, 0.5), L.ones(3, 2, 4, 2, 2), in_dims=0)",
    "normal_std_tensor": "rnd(L, lambda s: L.normal(0.0, s), L.ones(4, 3), in_dims=1)",
    "multinomial_repl": "rnd(L, lambda p: L.multinomial(p, 3, replacement=True), L.ones(3, 5), in_dims=0)",
    "randn_shape_same_nested": '(L.manual_seed(5), L.func.vmap(L.func.vmap(lambda x: x + L.randn(2), randomness="different"), randomness="different")(L.ones(3, 2, 2)))[1]',
    "dropout_unbatched_different": "rnd(L, lambda x: L.F.dropout(L.ones(4), 0.5) + x, L.zeros(3, 4))",
    "dropout_unbatched_same": "(L.manual_seed(5), L.func.vmap(lambda x: L.F.dropout(L.ones(4), 0.5) + x, randomness='same')(L.zeros(3, 4)))[1]",
    "dropout_unbatched_error": "V(L, lambda x: L.F.dropout(L.ones(4), 0.5) + x, L.zeros(3, 4))",
    "alpha_dropout_unbatched": "rnd(L, lambda x: L.F.alpha_dropout(L.ones(4), 0.5, True) + x, L.zeros(3, 4))",
    "dropout1d_channels": "rnd(L, lambda x: L.F.dropout1d(x, 0.5), L.ones(3, 4, 2))",
    "randperm_different": "rnd(L, lambda x: x[L.randperm(4)], XF(L, 3, 4))",
    "randperm_same": "(L.manual_seed(5), L.func.vmap(lambda x: x[L.randperm(4)], randomness='same')(XF(L, 3, 4)))[1]",
    # a draw that fills a batched tensor, or is made like one, fills its physical value in
    # memory order, batch dims moved in front: the serial normal where that is not row-major
    "rand_like_in1": "rnd(L, lambda x: L.rand_like(x), L.ones(3, 4), in_dims=1)",
    "randn_like_in1": "rnd(L, lambda x: L.randn_like(x) * x, XF(L, 3, 2), in_dims=1)",
    "randint_like_in1": "rnd(L, lambda x: L.randint_like(x, 10), L.ones(4, 3), in_dims=1)",
    "uniform_in1": "rnd(L, lambda x: x.clone().uniform_(), L.ones(4, 3), in_dims=1)",
    "normal_in1": "rnd(L, lambda x: x.clone().normal_(), L.ones(4, 3), in_dims=1)",
    "bernoulli_in1": "rnd(L, lambda x: x.clone().bernoulli_(0.3), L.ones(4, 3), in_dims=1)",
    "exponential_in1": "rnd(L, lambda x: x.clone().exponential_(), L.ones(4, 3), in_dims=1)",
    "uniform_input_in1": "rnd(L, lambda x: x.uniform_(), L.ones(4, 3), in_dims=1)",
    "randn_like_big_in1": "rnd(L, lambda x: L.randn_like(x), XF(L, 4, 8), in_dims=1)",
    "normal_big_in1": "rnd(L, lambda x: x.clone().normal_(), XF(L, 4, 8), in_dims=1)",
    "randn_like_big_in0": "rnd(L, lambda x: L.randn_like(x), XF(L, 4, 8), in_dims=0)",
    "rand_like_transposed": "rnd(L, lambda x: L.rand_like(x), L.ones(4, 3).t(), in_dims=0)",
    "rand_like_permuted_in1": "rnd(L, lambda x: L.rand_like(x), L.ones(4, 3, 2).permute(2, 0, 1), in_dims=1)",
    "rand_like_dtype_in1": "rnd(L, lambda x: L.rand_like(x, dtype=L.float64), L.ones(4, 5), in_dims=1)",
    "randint_like_in2": "rnd(L, lambda x: L.randint_like(x, 10), L.ones(2, 3, 4), in_dims=2)",
    "normal_clone_transposed": "rnd(L, lambda x: x.clone().normal_(), L.ones(4, 3).t(), in_dims=1)",
    "rand_like_same_in1": '(L.manual_seed(5), L.func.vmap(lambda x: L.rand_like(x), in_dims=1, randomness="same")(L.ones(4, 3)))[1]',
    "randn_like_nested": '(L.manual_seed(5), L.func.vmap(L.func.vmap(lambda x: L.randn_like(x), in_dims=1, randomness="different"), in_dims=1, randomness="different")(L.ones(2, 3, 4)))[1]',
    "randn_like_nested_permuted": '(L.manual_seed(5), L.func.vmap(L.func.vmap(lambda x: L.randn_like(x), in_dims=1, randomness="different"), in_dims=0, randomness="different")(L.ones(5, 4, 3).permute(2, 0, 1)))[1]',
    "normal_nested": '(L.manual_seed(5), L.func.vmap(L.func.vmap(lambda x: x.clone().normal_(), in_dims=0, randomness="different"), in_dims=1, randomness="different")(L.ones(2, 3, 4, 5)))[1]',
    "rand_like_nested_outer_same": '(L.manual_seed(5), L.func.vmap(L.func.vmap(lambda x: L.rand_like(x), in_dims=1, randomness="different"), in_dims=1, randomness="same")(L.ones(2, 3, 4)))[1]',
}

COMPILED = {
    "c_vmap_grad": "compiled_per_example(L)",
    "c_hessian": "compiled(L, L.func.hessian(lambda x: (x.sin() * x.roll(1)).sum()))(X(L, 4))",
    "c_jvp": "compiled(L, lambda x, t: L.func.jvp(lambda y: y.softmax(0) * y, (x,), (t,)))(X(L, 4), X(L, 4))",
    "c_vmap_ops": "compiled(L, lambda x, w: L.func.vmap(lambda x: (x @ w).sort(-1).values.cumsum(0).amax(-1), in_dims=1)(x))(X(L, 3, 5, 4), X(L, 4, 2))",
    "c_vmap_outdims_chunk": "compiled(L, lambda x: L.func.vmap(lambda x: x.sin().T, in_dims=2, out_dims=1, chunk_size=2)(x))(X(L, 2, 3, 5))",
    "c_fwd_dual": "compiled(L, lambda x, t: level(L, lambda: L.fw.unpack_dual(L.fw.make_dual(x, t).tanh().cumprod(0)).tangent))(X(L, 4), X(L, 4))",
    "c_vmap_inplace_input": "(lambda x: (compiled(L, lambda x: V(L, lambda r: r.mul_(2), x, in_dims=1))(x), x))(X(L, 2, 3).clone())",
}

LOOPS = {  # vmap against a loop, staged alone: torch.func cannot batch these
    "nested_view_write": (
        "L.func.vmap(L.func.vmap(lambda a, b: (lambda y: (y[0].mul_(b[0]), y)[1])(a.clone()), in_dims=(0, None)), in_dims=(None, 0))(X(L, 3, 4), X(L, 2, 4))",
        "L.stack([L.stack([(lambda y: (y[0].mul_(b[0]), y)[1])(a.clone()) for a in X(L, 3, 4)]) for b in X(L, 2, 4)])",
    ),
    "nested_base_write_via_view": (
        "L.func.vmap(L.func.vmap(lambda a, b: (lambda y: (y.T.add_(b[:, None]), y)[1])(a.clone()[:, None].expand(4, 2).clone()), in_dims=(0, None)), in_dims=(None, 0))(X(L, 3, 4), X(L, 2, 2))",
        "L.stack([L.stack([(lambda y: (y.T.add_(b[:, None]), y)[1])(a.clone()[:, None].expand(4, 2).clone()) for a in X(L, 3, 4)]) for b in X(L, 2, 2)])",
    ),
    "gru": (
        "(lambda m: V(L, lambda x: m(x)[0], XF(L, 2, 3, 4)))((L.manual_seed(0), L.nn.GRU(4, 3))[1])",
        "(lambda m: L.stack([m(x)[0] for x in XF(L, 2, 3, 4)]))((L.manual_seed(0), L.nn.GRU(4, 3))[1])",
    ),
    "view_of_noncontiguous_written": (
        "V(L, lambda x: (x.view(-1).mul_(2), x)[1], X(L, 3, 4, 2).clone(), in_dims=1)",
        "X(L, 3, 4, 2).movedim(1, 0) * 2",
    ),
}
# each op through jacfwd, jacrev, vmap (in_dims=1) and vmap of jvp: their rules agree
OPS = {
    "sort": "lambda x: x.sort(-1).values",
    "topk": "lambda x: x.topk(2).values",
    "cummax": "lambda x: x.cummax(0).values",
    "amax": "lambda x: x.amax(0)",
    "max_dim": "lambda x: x.max(-1).values",
    "median": "lambda x: x.median(0).values",
    "gather": "lambda x: x.gather(0, x.argsort(0))",
    "index_put_acc": "lambda x: x.index_put((x.argmax(0),), x[0] * 2, accumulate=True)",
    "scatter": "lambda x: x.scatter(0, x.argmin(0, keepdim=True), x[:1] ** 2)",
    "scatter_add": "lambda x: x.scatter_add(1, x.argsort(1)[:, :1], x[:, 1:2].exp())",
    "norm": "lambda x: x.norm(dim=0)",
    "std": "lambda x: x.std(0)",
    "logsumexp": "lambda x: x.logsumexp(1)",
    "prod": "lambda x: x.prod(0)",
    "cumprod": "lambda x: x.cumprod(1)",
    "softmax": "lambda x: x.softmax(0)",
    "log_softmax": "lambda x: x.log_softmax(-1)",
    "masked": "lambda x: x.masked_fill(x > 0.3, 0.) * x",
    "where": "lambda x: (x > 0).where(x.exp(), x.sin())",
    "clamp": "lambda x: x.clamp(-0.5, 0.5)",
    "pow": "lambda x: x.abs() ** x",
    "atan2": "lambda x: x.atan2(x.flip(0))",
    "matmul": "lambda x: x @ x.T",
    "gram": "lambda x: x.T @ x",
    "det": "lambda x: x[:2, :2].det()",
    "inv": "lambda x: (x[:2, :2] + 3 * x.new_ones(2).diag()).inverse()",
    "pinv": "lambda x: x.pinverse()",
    "unfold": "lambda x: x.unfold(1, 2, 1).sum(-1)",
    "inplace_view": "lambda x: (lambda y: (y[0].mul_(x[1]), y.T[1].add_(1), y)[2])(x.clone())",
    "diag_inplace": "lambda x: (lambda y: (y.diagonal().exp_(), y)[1])(x[:2, :2].clone())",
    "index_select": "lambda x: x.index_select(1, x[0].argsort())",
    "take": "lambda x: x.take(x.flatten().argsort()[:3])",
    "roll_flip": "lambda x: x.roll(1, 1).flip(0).rot90()",
    "trace": "lambda x: x[:2, :2].trace() * x",
    "cross": "lambda x: x[:, :3].cross(x[:, :3].flip(0), dim=1)",
    "repeat_interleave": "lambda x: x.repeat_interleave(2, dim=0)",
    "kron": "lambda x: x[:1, :2].kron(x[1:, :2])",
    "distances": "lambda x: (x[:, None] - x[None]).pow(2).sum(-1).add(1).sqrt()",
    "lerp": "lambda x: x.lerp(x.flip(1), x.sigmoid())",
    "row_normalize": "lambda x: x / x.norm(dim=1, keepdim=True)",
    "logcumsumexp": "lambda x: x.logcumsumexp(0)",
    "amin_tuple": "lambda x: x.amin((0, 1))",
    "var_mean": "lambda x: x.var_mean(1)[0] + x.var_mean(1)[1]",
    "diff": "lambda x: x.cumsum(1).diff(dim=1)",
}
OP_TRANSFORMS = {
    "jacfwd": "L.func.jacfwd({op})(X(L, 2, 3))",
    "jacrev": "L.func.jacrev({op})(X(L, 2, 3))",
    "vmap": "V(L, {op}, X(L, 2, 3, 4), in_dims=1)",
    "vmap_jvp": (
        "V(L, lambda x, t: L.func.jvp({op}, (x,), (t,)), X(L, 2, 3, 4),"
        " X(L, 4, 3, 2).transpose(0, 2), in_dims=(1, 1))"
    ),
}
for _t, _src in OP_TRANSFORMS.items():
    TRANSFORMS.update({f"{_t}_{k}": _src.format(op=op) for k, op in OPS.items()})

# raised by both with the same type, worded differently (staged's names its cause)
TYPE_ONLY = {
    "bincount_err",  # torch: stack's sizes, from its fallback loop
    "nonzero_err",
    "unique_err",
    "masked_select_err",  # torch: "dynamic shape"; staged: a batched tensor's data read
    "item_err",
    "inplace_unbatched_err",  # torch: "output with shape ... broadcast shape"
    "inplace_inner_into_outer_err",
    "in_dims_err",  # torch adds the pytree specs
    "bn_train_err",  # torch: batch norm's own message
    "inplace_into_view_of_captured",
    "vmap_bool_cond_err",  # torch: "data-dependent control flow"
    "vmap_inplace_saved_input_err",  # torch names the tensor's type differently
}


def _value(r):
    """A result in comparable form: tensors as (dtype name, shape, array)."""
    if isinstance(r, (staged.Tensor, torch.Tensor)):
        return str(r.dtype).rpartition(".")[2], tuple(r.shape), to_numpy(r)
    if isinstance(r, dict):
        return {k: _value(v) for k, v in r.items()}
    if isinstance(r, (tuple, list)):
        return [_value(v) for v in r]
    return r


def _assert_same(ours, theirs, where="result"):
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and ours.keys() == theirs.keys(), where
        for k in theirs:
            _assert_same(ours[k], theirs[k], f"{where}[{k!r}]")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), (where, ours, theirs)
        for k, (a, b) in enumerate(zip(ours, theirs)):
            _assert_same(a, b, f"{where}[{k}]")
    elif isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and ours[:2] == theirs[:2], (where, ours[:2], theirs[:2])
        np.testing.assert_allclose(
            ours[2], theirs[2], rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=where
        )
    else:
        assert ours == theirs, (where, ours, theirs)


def _run(src, lib):
    scope = {**globals(), "L": _Lib(lib)}
    try:
        return "ok", _value(eval(src, scope))
    except Exception as e:  # the type and message are what is compared
        return "raised", e


def _check(name, src):
    ours, theirs = _run(src, staged), _run(src, torch)
    if theirs[0] == "raised":
        assert ours[0] == "raised", f"torch raised {theirs[1]!r}, staged returned"
        assert type(ours[1]) is type(theirs[1]), (ours[1], theirs[1])
        if name not in TYPE_ONLY:
            assert str(theirs[1]) in message(ours[1]).replace("staged", "torch"), (
                message(ours[1]),
                str(theirs[1]),
            )
    else:
        assert ours[0] == "ok", ours[1]
        _assert_same(ours[1], theirs[1])


def _cases(table):
    return pytest.mark.parametrize(("name", "src"), table.items(), ids=list(table))


@_cases(VMAP)
def test_vmap(name, src):
    _check(name, src)


@_cases(TRANSFORMS)
def test_transforms(name, src):
    _check(name, src)


@_cases(FUNCTIONAL)
def test_functional(name, src):
    _check(name, src)


@_cases(FORWARD_AD)
def test_forward_ad(name, src):
    _check(name, src)


@_cases(RANDOM)
def test_randomness(name, src):
    _check(name, src)


@_cases(COMPILED)
def test_compiled(name, src):
    _check(name, src)


@pytest.mark.parametrize(("name", "srcs"), LOOPS.items(), ids=list(LOOPS))
def test_vmap_against_loop(name, srcs):
    batched, looped = (_run(s, staged) for s in srcs)
    assert batched[0] == looped[0] == "ok", (batched[1], looped[1])
    _assert_same(batched[1], looped[1])


def test_compiled_grad_of_closure_refuses():
    """A compiled ``grad`` whose result has a graph through a captured tensor that
    requires grad (torch.func's does) refuses a backward through it, rather than giving
    a gradient without that term."""
    y = staged.tensor(rn(3), requires_grad=True)
    f = staged.compile(lambda x: staged.func.grad(lambda x: (x * y).pow(2).sum())(x))
    g = f(staged.tensor(rn(3)))
    with pytest.raises(RuntimeError, match="requires grad but carries no autograd graph"):
        staged.autograd.grad(g.sum(), y)
