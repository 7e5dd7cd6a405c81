"""nn.functional ops against torch 2.13 (values and every input/weight gradient), finite
differences, and compiled (llvm-cpu) == eager; dropout's masks (torch's eagerly, the
counter-based generator's in compiled steps)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import staged
import staged.nn.functional as F
from tests.checks import (
    assert_close,
    assert_raises_like_torch,
    check_grads,
    compare_with_torch,
    message,
)


def r(*shape, dtype=np.float64):
    return np.random.standard_normal(shape).astype(dtype)


CONV2D = [
    dict(),
    dict(stride=2, padding=1),
    dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1)),
    dict(padding="same", dilation=2),
    dict(padding="same"),  # even kernel below: the extra pad goes to the end
    dict(padding="valid", groups=2),
    dict(groups=4, stride=2, padding=1),
]


@pytest.mark.parametrize("kw", CONV2D, ids=str)
def test_conv2d_matches_torch(kw):
    groups = kw.get("groups", 1)
    k = (2, 4) if kw == dict(padding="same") else (3, 3)
    x, w, b = r(2, 4, 7, 6), r(8, 4 // groups, *k), r(8)
    compare_with_torch(
        lambda x, w, b: F.conv2d(x, w, b, **kw),
        lambda x, w, b: TF.conv2d(x, w, b, **kw),
        x,
        w,
        b,
        rtol=1e-10,
        atol=1e-10,
    )


def test_conv2d_float32_unbatched_no_bias_and_conv1d():
    x, w = r(3, 9, 8, dtype=np.float32), r(5, 3, 3, 2, dtype=np.float32)
    compare_with_torch(
        lambda x, w: F.conv2d(x, w, stride=2),
        lambda x, w: TF.conv2d(x, w, stride=2),
        x,
        w,
        rtol=1e-5,
        atol=1e-5,
    )
    x, w, b = r(2, 4, 11), r(6, 2, 3), r(6)
    compare_with_torch(
        lambda x, w, b: F.conv1d(x, w, b, 2, 1, 2, 2),
        lambda x, w, b: TF.conv1d(x, w, b, 2, 1, 2, 2),
        x,
        w,
        b,
        rtol=1e-10,
        atol=1e-10,
    )


def test_conv2d_second_order_matches_finite_differences():
    check_grads(
        lambda x, w: F.conv2d(x, w, stride=2, padding=1, groups=2),
        [r(1, 2, 5, 4), r(2, 1, 3, 2)],
        order=2,
        rtol=1e-4,
    )


def test_conv2d_errors_match_torch():
    x = staged.tensor(r(2, 5, 8, 8))
    with pytest.raises(RuntimeError, match=r"expected input\[2, 5, 8, 8\] to have 3 channels"):
        F.conv2d(x, staged.tensor(r(4, 3, 3, 3)))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input"):
        F.conv2d(x, staged.tensor(r(4, 5, 9, 9)))
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided"):
        F.conv2d(x, staged.tensor(r(4, 5, 3, 3)), stride=2, padding="same")
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D \\(batched\\)"):
        F.conv2d(staged.tensor(r(5, 8)), staged.tensor(r(4, 5, 3, 3)))


MAX_POOL = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(3, 2), stride=1, dilation=(1, 2), padding=1),
    dict(kernel_size=2, stride=(1, 2), ceil_mode=True),
]


@pytest.mark.parametrize("kw", MAX_POOL, ids=str)
def test_max_pool2d_matches_torch_with_indices(kw):
    x = r(2, 3, 7, 6)
    compare_with_torch(lambda x: F.max_pool2d(x, **kw), lambda x: TF.max_pool2d(x, **kw), x)
    y, i = F.max_pool2d(staged.tensor(x), return_indices=True, **kw)
    ty, ti = TF.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    assert_close(y, ty)
    assert_close(i, ti)


def test_max_pool_ties_send_the_gradient_to_the_first_maximum():
    x = np.ones((1, 1, 4, 4))
    compare_with_torch(lambda x: F.max_pool2d(x, 3, 1), lambda x: TF.max_pool2d(x, 3, 1), x)
    compare_with_torch(lambda x: F.max_pool1d(x, 2), lambda x: TF.max_pool1d(x, 2), r(2, 3, 5))


def test_max_pool_nan_and_inf_match_torch():
    # NaN is a window's maximum (its gradient goes to the NaN); infinities are values
    x = np.round(r(2, 3, 6, 7))  # ties
    x[0, 0, 1, 1] = x[1, 2, 4, 5] = np.nan
    x[0, 1, 2, 2] = x[1, 0, 0, 0] = -np.inf
    x[1, 1, 2, 2] = x[1, 1, 2, 3] = np.inf
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1)):
        compare_with_torch(lambda x: F.max_pool2d(x, **kw), lambda x: TF.max_pool2d(x, **kw), x)
        y, i = F.max_pool2d(staged.tensor(x), return_indices=True, **kw)
        assert_close(i, TF.max_pool2d(torch.tensor(x), return_indices=True, **kw)[1])


@pytest.mark.parametrize("overlapping", [False, True])
def test_conv_and_pool_results_are_contiguous_as_torch(overlapping):
    # the impls lay windows out per sample or batch-last (Note [window layout]): either
    # way the results are C-contiguous tensors, as torch's
    k, s = (3, 1) if overlapping else (2, 2)
    x = staged.tensor(r(2, 4, 8, 8, dtype=np.float32))
    w = staged.tensor(r(6, 4, k, k, dtype=np.float32))
    outs = [
        F.conv2d(x, w, stride=s),
        F.conv2d(x[0], w, stride=s),
        F.max_pool2d(x, k, s),
        F.max_pool2d(x, k, s, return_indices=True)[1],
        F.avg_pool2d(x, k, s),
        F.unfold(x, k, stride=s),
    ]
    assert all(o.is_contiguous() for o in outs)


def test_pool_padding_error():
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel"):
        F.max_pool2d(staged.tensor(r(1, 1, 5, 5)), 2, padding=2)


AVG_POOL = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(3, 2), padding=(1, 0), divisor_override=5),
]


@pytest.mark.parametrize("kw", AVG_POOL, ids=str)
def test_avg_pool2d_matches_torch(kw):
    compare_with_torch(
        lambda x: F.avg_pool2d(x, **kw),
        lambda x: TF.avg_pool2d(x, **kw),
        r(2, 3, 7, 6),
        rtol=1e-10,
        atol=1e-12,
    )


def test_pools_and_unfold_match_finite_differences():
    x = np.random.permutation(60).reshape(1, 3, 4, 5) / 7.0  # distinct: no max ties
    check_grads(lambda x: F.max_pool2d(x, 2, 1, padding=1), [x], order=2, rtol=1e-4)
    check_grads(lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), [x], order=2)
    compare_with_torch(
        lambda x: F.unfold(x, (2, 3), 2, 1, (1, 2)), lambda x: TF.unfold(x, (2, 3), 2, 1, (1, 2)), x
    )


def test_layer_norm_matches_torch():
    x, w, b = r(3, 4, 5), r(4, 5), r(4, 5)
    compare_with_torch(
        lambda x, w, b: F.layer_norm(x, (4, 5), w, b, 1e-3),
        lambda x, w, b: TF.layer_norm(x, (4, 5), w, b, 1e-3),
        x,
        w,
        b,
        rtol=1e-9,
        atol=1e-9,
    )
    compare_with_torch(
        lambda x: F.layer_norm(x, 5), lambda x: TF.layer_norm(x, (5,)), x, rtol=1e-9, atol=1e-9
    )
    check_grads(lambda x, w: F.layer_norm(x, (5,), w), [r(2, 5), r(5)], order=2, rtol=1e-4)


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5, 2)])
def test_batch_norm_training_updates_running_stats_as_torch(shape):
    x, w, b = r(*shape), r(3), r(3)
    rm, rv = np.random.standard_normal(3), np.random.uniform(0.5, 2, 3)
    srm, srv, trm, trv = (staged.tensor(rm), staged.tensor(rv), torch.tensor(rm), torch.tensor(rv))
    for _ in range(2):
        compare_with_torch(
            lambda x, w, b: F.batch_norm(x, srm, srv, w, b, True, 0.3, 1e-3),
            lambda x, w, b: TF.batch_norm(x, trm, trv, w, b, True, 0.3, 1e-3),
            x,
            w,
            b,
            rtol=1e-9,
            atol=1e-9,
        )
        assert_close(srm, trm, rtol=1e-12)
        assert_close(srv, trv, rtol=1e-12)
    compare_with_torch(
        lambda x, w, b: F.batch_norm(x, srm, srv, w, b),
        lambda x, w, b: TF.batch_norm(x, trm, trv, w, b),
        x,
        w,
        b,
        rtol=1e-9,
        atol=1e-9,
    )
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.batch_norm(staged.tensor(r(1, 3)), None, None, training=True)


@pytest.mark.parametrize("idx,n", [([0, 3], 3), ([-1, 0], 3), ([-2], -1), ([0, 1], 0), ([], -1)])
def test_one_hot_rejects_classes_out_of_range(idx, n):
    with pytest.raises(RuntimeError) as want:
        TF.one_hot(torch.tensor(idx, dtype=torch.int64), n)
    with pytest.raises(RuntimeError) as got:
        F.one_hot(staged.tensor(np.array(idx, np.int64)), n)
    assert message(got.value).startswith(str(want.value)), (got.value, want.value)


def test_embedding_padding_idx_gets_no_gradient_and_one_hot_pad():
    idx = np.array([[0, 2, 4], [2, 2, 1]])
    compare_with_torch(
        lambda w: F.embedding(staged.tensor(idx), w, padding_idx=2),
        lambda w: TF.embedding(torch.tensor(idx), w, padding_idx=2),
        r(5, 3),
    )
    assert_close(F.one_hot(staged.tensor([0, 3, 1])), TF.one_hot(torch.tensor([0, 3, 1])))
    assert_close(F.one_hot(staged.tensor([[0], [1]]), 3), TF.one_hot(torch.tensor([[0], [1]]), 3))
    for p in [(1, 2), (1, -1, 0, 2), (-1, -1, 2, 0, 1, 1)]:
        compare_with_torch(
            lambda x: F.pad(x, p, value=1.5), lambda x: TF.pad(x, p, value=1.5), r(2, 3, 4)
        )


# --- dropout ----------------------------------------------------------------------------
def test_dropout_edge_cases_and_scaling():
    x = staged.tensor(r(200, 50), requires_grad=True)
    assert F.dropout(x, 0.0) is x and F.dropout(x, 0.7, training=False) is x
    y = F.dropout(x, 1.0)
    assert not y.detach().numpy().any()
    y = F.dropout(x, 0.3)
    kept = y.detach().numpy() != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(y.detach().numpy()[kept], x.detach().numpy()[kept] / 0.7)
    (g,) = staged.autograd.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), kept / 0.7)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.dropout(x, 1.5)


def test_dropout_masks_are_seeded_and_fresh_each_call():
    x = staged.ones(64, 64)
    staged.manual_seed(7)
    a, b = F.dropout(x).numpy(), F.dropout(x).numpy()
    staged.manual_seed(7)
    assert np.array_equal(F.dropout(x).numpy(), a)
    assert (a != b).mean() > 0.3
    out = staged.ones(4)
    F.dropout(out, 0.5, inplace=True)
    assert set(np.unique(out.numpy())) <= {0.0, 2.0}


# --- compiled == eager ---------------------------------------------------------------------
DROPOUT = 7  # its mask is torch's eagerly, the counter-based generator's compiled


def _nn_ops(x, w, v, emb):
    """Every op at once, forward and gradients: one compiled module for all of them."""
    h = F.conv2d(x, w, None, stride=(2, 1), padding=1, groups=2)
    outs = [
        h,
        F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
        F.avg_pool2d(x, 2, 1, 1),
        F.layer_norm(x, (7,)),
        F.batch_norm(x, None, None, training=True),
        F.pad(x, (1, -1, 2, 0)),
        F.unfold(x, 2),
        F.dropout(x, 0.4),
        F.embedding(staged.tensor([[1, 0], [2, 2]]), emb, padding_idx=2),
    ]
    loss = sum((o * o).sum() for i, o in enumerate(outs) if i != DROPOUT) + (v * h).sum()
    grads = staged.autograd.grad(loss, [x, w, v, emb])
    return outs + list(grads)


def test_compiled_matches_eager_and_draws_fresh_dropout_masks():
    x = staged.tensor(r(2, 4, 6, 7, dtype=np.float32), requires_grad=True)
    w = staged.tensor(r(6, 2, 3, 3, dtype=np.float32), requires_grad=True)
    v = staged.tensor(r(2, 6, 3, 7, dtype=np.float32), requires_grad=True)
    emb = staged.tensor(r(3, 5, dtype=np.float32), requires_grad=True)
    staged.manual_seed(11)
    eager = [[t.detach().numpy() for t in _nn_ops(x, w, v, emb)] for _ in range(2)]
    step = staged.compile(_nn_ops)
    staged.manual_seed(11)
    compiled = [[t.detach().numpy() for t in step(x, w, v, emb)] for _ in range(2)]
    staged.manual_seed(11)
    reseeded = step(x, w, v, emb)[DROPOUT].detach().numpy()
    assert step.traces == 1
    for e_call, c_call in zip(eager, compiled):
        for i, (a, b) in enumerate(zip(e_call, c_call)):
            if i != DROPOUT:
                np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-4, err_msg=f"output {i}")
    masks = [c[DROPOUT] != 0 for c in compiled]
    assert not np.array_equal(*masks)  # a fresh mask each call
    np.testing.assert_allclose(
        compiled[0][DROPOUT][masks[0]], x.detach().numpy()[masks[0]] / 0.6, rtol=1e-6
    )
    np.testing.assert_array_equal(reseeded, compiled[0][DROPOUT])  # seeded by manual_seed


@pytest.mark.parametrize(
    "shape,pad",
    [
        ((1, 1, 2, 3, 3), (0, 0, 0, 0, 3, 3)),
        ((1, 1, 3, 2, 3), (0, 0, 3, 3, 0, 0)),
        ((1, 2, 3), (3, 3)),
    ],
)
def test_reflect_padding_too_large_names_torchs_argument(shape, pad):
    """The argument number counts the pad pairs from the last dim (was always #4)."""
    assert_raises_like_torch(lambda ns: ns.nn.functional.pad(ns.zeros(shape), pad, mode="reflect"))


@pytest.mark.parametrize(
    "pool",
    [
        lambda ns, t: ns.nn.functional.max_pool2d(t, 3, 2, 1, return_indices=True),
        lambda ns, t: ns.nn.functional.max_pool1d(t.flatten(2), 4, 3, return_indices=True),
        lambda ns, t: ns.nn.functional.adaptive_max_pool2d(t, (3, 4), return_indices=True),
        lambda ns, t: ns.nn.functional.adaptive_max_pool1d(t.flatten(2), 6, return_indices=True),
    ],
)
def test_max_pooling_picks_torchs_element_among_nans(pool):
    """torch takes a window's last NaN (``val > max || isnan(val)``) and otherwise its first
    maximum; staged took the first NaN: other indices, the gradient elsewhere."""
    x = np.random.default_rng(0).standard_normal((2, 2, 5, 7)).astype(np.float32)
    x[np.random.default_rng(1).random(x.shape) < 0.3] = np.nan
    x[0, 0, 0, :3] = 1.0  # ties: the first maximum
    got = []
    for ns in (staged, torch):
        t = ns.tensor(x, requires_grad=True)
        out, idx = pool(ns, t)
        out.sum().backward()
        got.append((np.asarray(idx.tolist()), np.asarray(t.grad.tolist())))
    np.testing.assert_array_equal(got[0][0], got[1][0])
    np.testing.assert_array_equal(got[0][1], got[1][1])


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(2, -1), (-2, 1), (-1, -1), (-2, 3), (1, -1, -1, 2)])
def test_negative_padding_crops_in_every_mode_as_torch(mode, pad):
    """A negative amount crops (NotImplementedError outside constant mode before):
    reflection and replication read the whole dim, wrapping only what is kept."""
    compare_with_torch(
        lambda x: F.pad(x, pad, mode=mode),
        lambda x: TF.pad(x, pad, mode=mode),
        r(2, 4, 6) if len(pad) == 2 else r(1, 2, 4, 6),
    )


def test_circular_padding_past_the_cropped_dim_raises():
    """torch refuses it too (with an error about overlapping memory)."""
    with pytest.raises(RuntimeError):
        TF.pad(torch.zeros(1, 1, 6), (4, -3), mode="circular")
    with pytest.raises(RuntimeError, match="wrapping around more than once"):
        F.pad(staged.zeros(1, 1, 6), (4, -3), mode="circular")


@pytest.mark.parametrize(
    "mode, pad", [("reflect", (-3, -3)), ("replicate", (-4, -4)), ("circular", (-4, -4))]
)
def test_cropping_past_the_dim_raises_torchs_error(mode, pad):
    """An empty or negative size: torch's errors (an empty tensor before)."""
    assert_raises_like_torch(lambda ns: ns.nn.functional.pad(ns.zeros(1, 1, 6), pad, mode=mode))
