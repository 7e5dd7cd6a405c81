"""torch names staged lacked (a vision/statistics hunt's programs), each against torch 2.13:
``triangular_solve`` (deprecated, warning as torch's), ``frobenius_norm``,
``nuclear_norm``, ``channel_shuffle``, ``GradScaler``, ``nn.NLLLoss2d``,
``autograd.set_multithreading_enabled`` and ``func.replace_all_batch_norm_modules_``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import staged
from tests.checks import to_numpy


def _both(fn, *arrays):
    outs = []
    for L in (torch, staged):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = fn(L, *(L.tensor(a, requires_grad=True) for a in arrays))
        outs.append((out, [str(x.message) for x in w]))
    return outs


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_triangular_solve_is_torchs(upper, transpose, unitriangular):
    rng = np.random.default_rng(0)
    A = np.triu(rng.standard_normal((2, 3, 3))) + 3 * np.eye(3)
    A = A if upper else A.transpose(0, 2, 1)
    B = rng.standard_normal((2, 3, 2))

    def fn(L, b, a):
        r = L.triangular_solve(b, a, upper, transpose, unitriangular)
        grads = L.autograd.grad(r.solution.sum(), (b, a))
        return (r.solution, r.cloned_coefficient, *grads), type(r).__name__

    (theirs, _), (ours, warned) = _both(fn, B, A)  # torch's warns once a process
    assert ours[1] == theirs[1] == "triangular_solve"
    for o, t in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(to_numpy(o), t.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert warned == [
        "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangular and will "
        "be removed in a future PyTorch release.\ntorch.linalg.solve_triangular has its "
        "arguments reversed and does not return a copy of one of the inputs.\nX = "
        "torch.triangular_solve(B, A).solution\nshould be replaced with\nX = "
        "torch.linalg.solve_triangular(A, B)."
    ]


def test_the_norms_torch_keeps_at_the_top_level():
    x = np.random.default_rng(1).standard_normal((2, 3, 4))
    forms = [
        lambda L, t: L.frobenius_norm(t, (1, 2)),
        lambda L, t: L.frobenius_norm(t, 1, True),
        lambda L, t: L.nuclear_norm(t[0]),
        lambda L, t: L.nuclear_norm(t[0], True),
        lambda L, t: L.nuclear_norm(t),
        lambda L, t: L.nuclear_norm(t, (0, 2), keepdim=True),
    ]
    for form in forms:
        (theirs, _), (ours, _) = _both(form, x)
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(to_numpy(ours), theirs.detach().numpy(), rtol=1e-12)


def test_channel_shuffle_and_grad_scaler_at_the_top_level():
    x = np.arange(16.0).reshape(1, 8, 1, 2)
    (theirs, _), (ours, _) = _both(lambda L, t: L.channel_shuffle(t, 4), x)
    np.testing.assert_array_equal(to_numpy(ours), theirs.detach().numpy())
    assert staged.GradScaler is staged.amp.GradScaler


def test_nll_loss_2d_is_nll_loss_warning_as_torch():
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 4))
    target = np.random.default_rng(3).integers(0, 3, (2, 4, 4))
    outs = []
    for L in (torch, staged):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            loss = L.nn.NLLLoss2d()
        assert isinstance(loss, L.nn.NLLLoss)
        outs.append((float(loss(L.tensor(x).log_softmax(1), L.tensor(target))), w))
    assert outs[0][0] == pytest.approx(outs[1][0], rel=1e-12)
    assert [(str(m.message), m.category) for m in outs[1][1]] == [
        (str(m.message), m.category) for m in outs[0][1]
    ]


def test_set_multithreading_enabled_is_kept_like_torchs():
    from staged.autograd.grad_mode import is_multithreading_enabled

    with staged.autograd.set_multithreading_enabled(False):
        assert not is_multithreading_enabled()
    assert is_multithreading_enabled()

    staged.autograd.set_multithreading_enabled(False)  # a call switches it at once, as torch's
    assert not is_multithreading_enabled()
    staged.autograd.set_multithreading_enabled(True)
    x = staged.ones(2, requires_grad=True)
    with staged.autograd.set_multithreading_enabled(False):
        (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_replace_all_batch_norm_modules_drops_running_stats_as_torchs():
    outs = []
    for L in (torch, staged):
        L.manual_seed(0)
        m = L.nn.Sequential(
            L.nn.Conv2d(1, 2, 3),
            L.nn.BatchNorm2d(2),
            L.nn.InstanceNorm2d(2, track_running_stats=True),
        )
        assert L.func.replace_all_batch_norm_modules_(m) is m
        assert m[1].running_mean is None and m[1].running_var is None
        assert not m[1].track_running_stats and m[2].track_running_stats  # not InstanceNorm
        m.eval()  # batch statistics even in eval, with none kept
        outs.append(
            m(L.tensor(np.random.default_rng(4).standard_normal((2, 1, 5, 5)).astype(np.float32)))
        )
    np.testing.assert_allclose(to_numpy(outs[1]), outs[0].detach().numpy(), rtol=1e-5, atol=1e-5)


def test_instance_norm_is_no_batch_norm_as_in_torch():
    """Both derive from _NormBase: code that finds batch norms by ``_BatchNorm`` (to freeze
    them, to convert them to SyncBatchNorm, swa_utils.update_bn) leaves instance norms be."""
    for L in (torch, staged):
        norms = L.nn.modules.batchnorm
        inorm = L.nn.InstanceNorm2d(3, track_running_stats=True)
        assert not isinstance(inorm, norms._BatchNorm) and isinstance(inorm, norms._NormBase)
        assert isinstance(L.nn.LazyBatchNorm1d(), norms._BatchNorm)
    m = staged.nn.Sequential(staged.nn.InstanceNorm2d(3, track_running_stats=True))
    assert type(staged.nn.SyncBatchNorm.convert_sync_batchnorm(m)[0]) is staged.nn.InstanceNorm2d


def test_rnn_helpers_subclasses_call_are_torchs():
    """PackedSequence's casts, invert_permutation and RNNBase's checks (a sequence hunt's
    programs: subclasses of nn.LSTM call them, as AWD-LSTM-style code does)."""
    results = []
    for L in (torch, staged):
        rnn = L.nn.utils.rnn
        packed = rnn.pack_sequence(
            [L.tensor([1.0, 2, 3]), L.tensor([4.0, 5])], enforce_sorted=False
        )
        casts = [
            str(getattr(packed, c)().data.dtype).split(".")[1]
            for c in ("long", "int", "short", "char", "byte")
        ]
        lstm, gru = L.nn.LSTM(4, 3, num_layers=2, bidirectional=True), L.nn.GRU(4, 3)
        x, h = L.randn(5, 2, 4), (L.zeros(4, 2, 3), L.zeros(4, 2, 3))
        lstm.check_forward_args(x, h, None)
        errors = []
        for call in (
            lambda: lstm.check_forward_args(x, (L.zeros(4, 3, 3), h[1]), None),
            lambda: lstm.check_forward_args(x, (h[0], L.zeros(4, 2, 2)), None),
            lambda: gru.check_forward_args(x[0], L.zeros(1, 2, 3), None),
            lambda: gru.check_forward_args(x[..., :2], L.zeros(1, 2, 3), None),
        ):
            with pytest.raises(RuntimeError) as e:
                call()
            errors.append(str(e.value).split(": ", 1)[-1] if L is staged else str(e.value))
        perm = L.tensor([1, 0])
        results.append(
            (
                casts,
                rnn.invert_permutation(L.tensor([2, 0, 3, 1])).tolist(),
                rnn.invert_permutation(None),
                lstm.get_expected_hidden_size(x, None),
                lstm.get_expected_cell_size(x, L.tensor([2, 1])),
                errors,
                [
                    t.tolist()
                    for t in lstm.permute_hidden((L.arange(6.0).reshape(1, 2, 3),) * 2, perm)
                ],
                gru.permute_hidden(L.arange(6.0).reshape(1, 2, 3), None).tolist(),
            )
        )
    assert results[1] == results[0]


def test_tensor_storage_is_torchs_typed_storage():
    """``x.storage()`` (deprecated in torch, warning once a process): the memory as elements
    of the dtype, shared by every view."""
    seen = []
    for L in (torch, staged):
        x = L.arange(6.0).reshape(2, 3).to(L.float64)
        s, row = x.storage(), x[1].storage()
        seen.append(
            (
                type(s).__name__,
                s.size(),
                len(s),
                s.element_size(),
                s.nbytes(),
                s.data_ptr() == x.data_ptr() == row.data_ptr(),
                s.tolist(),
                s[4],
                str(s.device),
                s.untyped().nbytes(),
                repr(s).split("[")[0],
            )
        )
    assert seen[1] == seen[0]


@pytest.mark.parametrize("left", [True, False])
def test_linalg_solve_of_an_array_raises_torchs_type_error(left):
    """(an AttributeError about NumPy's dtype before)"""
    for L in (torch, staged):
        with pytest.raises(
            TypeError, match=r"argument 'B' \(position 2\) must be Tensor, not numpy.ndarray"
        ):
            L.linalg.solve(L.eye(2, dtype=L.float64), np.ones((2, 2)), left=left)
