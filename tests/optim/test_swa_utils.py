"""optim.swa_utils against torch's: AveragedModel's averages (SWA, EMA, one tensor at a
time or in lists, with buffers or not) after each step of a training run, update_bn's
statistics, SWALR's learning rates, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import staged
from tests.checks import assert_close, to_numpy


def _net(ns):
    """Conv, BatchNorm (one with its own momentum), InstanceNorm with running statistics
    (update_bn leaves it alone) and a head, with weights drawn by NumPy."""
    net = ns.nn.Sequential(
        ns.nn.Conv1d(3, 4, 1),
        ns.nn.BatchNorm1d(4, momentum=0.3),
        ns.nn.ReLU(),
        ns.nn.InstanceNorm1d(4, affine=True, track_running_stats=True),
        ns.nn.Conv1d(4, 4, 1),
        ns.nn.BatchNorm1d(4),
        ns.nn.ReLU(),
        ns.nn.Conv1d(4, 2, 1),
    )
    rng = np.random.RandomState(1)
    with ns.no_grad():
        for p in net.parameters():
            p.copy_(ns.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    return net


def _batches(ns, n=3):
    rng = np.random.RandomState(0)
    return [ns.tensor(rng.standard_normal((8, 3, 5)).astype(np.float32)) for _ in range(n)]


AVERAGING = {
    "swa": lambda u: {},
    "swa-buffers": lambda u: dict(use_buffers=True),
    "swa-multi": lambda u: dict(multi_avg_fn=u.get_swa_multi_avg_fn()),
    "ema-multi": lambda u: dict(multi_avg_fn=u.get_ema_multi_avg_fn(0.9)),
    "ema-multi-buffers": lambda u: dict(multi_avg_fn=u.get_ema_multi_avg_fn(0.3), use_buffers=True),
    "ema": lambda u: dict(avg_fn=u.get_ema_avg_fn(0.8)),
    "ema-buffers": lambda u: dict(avg_fn=u.get_ema_avg_fn(), use_buffers=True),
}


def _averaged_run(ns, name, steps=5):
    """SGD steps of the net, the averaged model updated after each: its state dicts."""
    net = _net(ns)
    avg = ns.optim.swa_utils.AveragedModel(net, **AVERAGING[name](ns.optim.swa_utils))
    opt = ns.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    history = []
    for x in _batches(ns, steps):
        opt.zero_grad()
        (net(x) - 1).pow(2).mean().backward()
        opt.step()
        avg.update_parameters(net)
        history.append({k: to_numpy(v).copy() for k, v in avg.state_dict().items()})
    return history, avg, net


@pytest.mark.parametrize("name", sorted(AVERAGING))
def test_averaged_model_equals_torch_after_each_step(name):
    ours, avg, net = _averaged_run(staged, name)
    theirs, tavg, _ = _averaged_run(torch, name)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        assert list(a) == list(b)  # "n_averaged", then "module.<name>", in torch's order
        for k in a:
            assert a[k].dtype == b[k].dtype, k
            # the net's own float32 steps differ from torch's in the last bits
            np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6, err_msg=f"{k} {step}")
        assert a["n_averaged"] == step + 1
    assert avg.module is not net and type(avg.module) is type(net)
    assert not np.allclose(ours[-1]["module.7.weight"], to_numpy(net[7].weight))  # averaged
    x = _batches(staged, 1)[0]
    assert_close(avg(x), avg.module(x))


def test_averaged_model_state_dict_round_trip_and_device():
    net = _net(staged)
    avg = staged.optim.swa_utils.AveragedModel(net, device="cpu")
    avg.update_parameters(net)
    avg.update_parameters(net)
    fresh = staged.optim.swa_utils.AveragedModel(net)
    fresh.load_state_dict(avg.state_dict())
    assert fresh.n_averaged.item() == 2 and fresh.n_averaged.dtype == staged.int64
    tavg = torch.optim.swa_utils.AveragedModel(_net(torch))
    assert list(fresh.state_dict()) == list(tavg.state_dict())


def test_update_bn_equals_torch():
    """One pass over batches given as tensors, tuples and lists: BatchNorm statistics as
    torch's, the InstanceNorm's left alone, momentum and training mode restored."""
    runs = []
    for ns in (staged, torch):
        net = _net(ns)
        net.eval()
        avg = ns.optim.swa_utils.AveragedModel(net)
        x0, x1, x2 = _batches(ns)
        ns.optim.swa_utils.update_bn([x0, (x1, 0), [x2]], avg.module, device="cpu")
        state = {k: to_numpy(v).copy() for k, v in avg.module.state_dict().items()}
        runs.append((state, avg.module.training, avg.module[1].momentum, avg.module[5].momentum))
    (ours, *flags), (theirs, *tflags) = runs
    assert flags == tflags == [False, 0.3, 0.1]
    for k in theirs:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert ours["1.num_batches_tracked"] == 3
    assert not np.allclose(ours["1.running_var"], 1.0)


def test_update_bn_without_batch_norm_reads_nothing():
    staged.optim.swa_utils.update_bn(iter(()), staged.nn.Linear(2, 2))
    staged.optim.swa_utils.update_bn(None, staged.nn.Linear(2, 2))  # never iterated


SWALR = {
    "cos": dict(swa_lr=0.05),
    "linear-per-group": dict(swa_lr=[0.05, 0.01], anneal_epochs=3, anneal_strategy="linear"),
    "no-annealing": dict(swa_lr=0.2, anneal_epochs=0),
}


def _swalr_lrs(ns, kwargs, after_cosine):
    """SWALR's lrs over 15 epochs of an SGD with two groups, from their initial lrs or
    after 4 epochs of CosineAnnealingLR (the usual switch to SWA)."""
    params = [ns.zeros(2, requires_grad=True), ns.zeros(3, requires_grad=True)]
    opt = ns.optim.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.3}], lr=0.1)
    if after_cosine:
        cosine = ns.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        for _ in range(4):
            opt.step()
            cosine.step()
    sched = ns.optim.swa_utils.SWALR(opt, **kwargs)
    lrs = [sched.get_last_lr()]
    for _ in range(15):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
    return lrs, sched


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
@pytest.mark.parametrize("after_cosine", [False, True])
@pytest.mark.parametrize("case", sorted(SWALR))
def test_swalr_learning_rates_equal_torch(case, after_cosine):
    ours, sched = _swalr_lrs(staged, SWALR[case], after_cosine)
    theirs, tsched = _swalr_lrs(torch, SWALR[case], after_cosine)
    assert ours == theirs  # the same float formulas in the same order
    assert ours[-1] == [g["swa_lr"] for g in sched.optimizer.param_groups]
    state = sched.state_dict()
    assert set(state) == set(tsched.state_dict())
    assert "anneal_func" not in state and state["_anneal_strategy"] == tsched._anneal_strategy


def test_swalr_state_dict_round_trip():
    ref, _ = _swalr_lrs(staged, SWALR["linear-per-group"], False)
    params = [staged.zeros(2, requires_grad=True), staged.zeros(3, requires_grad=True)]
    opt = staged.optim.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.3}], lr=0.1)
    sched = staged.optim.swa_utils.SWALR(opt, swa_lr=0.5)  # cos, to be overwritten
    for _ in range(2):
        sched.step()
    sched.load_state_dict(_swalr_lrs(staged, SWALR["linear-per-group"], False)[1].state_dict())
    assert sched.anneal_func(0.25) == 0.25  # linear again
    assert sched.get_last_lr() == ref[-1]


def _error(make):
    errors = []
    for ns in (staged, torch):
        opt = ns.optim.SGD([ns.zeros(2, requires_grad=True)], lr=0.1)
        with pytest.raises(Exception) as info:
            make(ns, opt)
        errors.append((type(info.value), str(info.value)))
    return errors


@pytest.mark.parametrize(
    "make",
    [
        lambda ns, o: ns.optim.swa_utils.get_ema_multi_avg_fn(1.5),
        lambda ns, o: ns.optim.swa_utils.get_ema_avg_fn(-0.1),
        lambda ns, o: ns.optim.swa_utils.AveragedModel(
            ns.nn.Linear(2, 2),
            avg_fn=ns.optim.swa_utils.get_swa_avg_fn(),
            multi_avg_fn=ns.optim.swa_utils.get_swa_multi_avg_fn(),
        ),
        lambda ns, o: ns.optim.swa_utils.SWALR(o, swa_lr=0.1, anneal_strategy="exp"),
        lambda ns, o: ns.optim.swa_utils.SWALR(o, swa_lr=0.1, anneal_epochs=-1),
        lambda ns, o: ns.optim.swa_utils.SWALR(o, swa_lr=0.1, anneal_epochs=2.0),
        lambda ns, o: ns.optim.swa_utils.SWALR(o, swa_lr=[0.1, 0.2]),
        lambda ns, o: ns.optim.swa_utils.SWALR(o, swa_lr=0.1, last_epoch=3),
    ],
    ids=[
        "ema-multi-decay",
        "ema-decay",
        "avg-fn-and-multi",
        "swalr-strategy",
        "swalr-epochs",
        "swalr-float-epochs",
        "swalr-groups",
        "swalr-resume",
    ],
)
def test_errors_match_torch(make):
    ours, theirs = _error(make)
    assert ours == theirs
