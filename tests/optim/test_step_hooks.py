"""Optimizer step hooks (per optimizer and global, torch.optim.optimizer's) against torch:
their order, a pre hook's new arguments, its error, removal, every optimizer class, a
subclass's step, a compiled step; and ``lr_scheduler._LRScheduler``."""

from __future__ import annotations

import copy
import importlib
import warnings

import numpy as np
import pytest
import torch

import staged
import staged.nn.functional as F
from staged import nn, optim
from tests.checks import assert_close, both

CLASSES = [
    "Adadelta",
    "Adafactor",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "ASGD",
    "LBFGS",
    "Muon",
    "NAdam",
    "RAdam",
    "RMSprop",
    "Rprop",
    "SGD",
    "SparseAdam",
]


def _module(lib):
    return importlib.import_module(f"{lib.__name__}.optim.optimizer")


def _param(lib):
    return lib.nn.Parameter(lib.tensor([[1.0, -2.0], [0.5, 3.0]]))


def _logged(lib, opt, log, p):
    """Handles of a global and an instance pre and post hook each, logging their kind and
    ``p``'s values (so where the update happened)."""
    mod = _module(lib)

    def hook(kind):
        return lambda o, args, kwargs: log.append((kind, o is opt, len(args), p.tolist()))

    return [
        mod.register_optimizer_step_post_hook(hook("global post")),
        opt.register_step_post_hook(hook("post")),
        opt.register_step_pre_hook(hook("pre")),
        mod.register_optimizer_step_pre_hook(hook("global pre")),
    ]


def test_hooks_run_in_torchs_order_and_are_removable():
    def run(lib):
        p = _param(lib)
        p.grad = lib.ones(2, 2)
        opt = lib.optim.SGD([p], lr=0.5)
        log = []
        handles = _logged(lib, opt, log, p)
        opt.step()
        for h in handles:
            h.remove()
        opt.step()  # no hook left
        return log

    ours, theirs = both(run)
    assert ours == theirs
    assert [kind for kind, *_ in ours] == ["global pre", "pre", "post", "global post"]
    assert ours[1][-1] != ours[2][-1]  # the step ran between the pre and the post hooks


def test_pre_hook_replaces_the_arguments():
    def run(lib):
        p = _param(lib)
        opt = lib.optim.SGD([p], lr=0.1)
        seen = []

        def swap(o, args, kwargs):
            seen.append((len(args), sorted(kwargs)))
            return (o,), {"closure": lambda: 7.0}

        opt.register_step_pre_hook(swap)
        opt.register_step_post_hook(lambda o, args, kwargs: seen.append(sorted(kwargs)))
        return opt.step(closure=lambda: 1.0), seen

    ours, theirs = both(run)
    assert ours == theirs == (7.0, [(1, ["closure"]), ["closure"]])


@pytest.mark.parametrize("bad", [3, (1, 2, 3)])
def test_pre_hook_bad_result_raises_as_torch(bad):
    messages = []
    for lib in (staged, torch):
        opt = lib.optim.SGD([_param(lib)], lr=0.1)
        opt.register_step_pre_hook(lambda o, a, k: bad)
        with pytest.raises(RuntimeError) as e:
            opt.step()
        messages.append(str(e.value).split(">", 1)[1])  # after the step function's repr
    assert messages[0] == messages[1]
    assert "must return None or a tuple of (new_args, new_kwargs), but got" in messages[0]


def _stepped(lib, name, log):
    """A step of optimizer ``name`` (with hooks logging into ``log``)."""
    p = _param(lib)
    opt = getattr(lib.optim, name)([p], lr=0.01)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    handles = _logged(lib, opt, log, p)
    try:
        # SparseAdam without a gradient: its step takes only sparse ones
        return opt.step() if name == "SparseAdam" else opt.step(closure)
    finally:
        for h in handles:
            h.remove()


@pytest.mark.parametrize("name", CLASSES)
def test_every_optimizer_runs_its_hooks_once(name):
    ours, theirs = [], []
    _stepped(staged, name, ours)
    _stepped(torch, name, theirs)
    assert [k for k, *_ in ours] == ["global pre", "pre", "post", "global post"]
    assert [k for k, *_ in ours] == [k for k, *_ in theirs]
    for a, b in zip(ours, theirs):
        assert a[:3] == b[:3]
        np.testing.assert_allclose(a[3], b[3], rtol=1e-4)  # Muon: torch's bfloat16 steps


def test_subclass_step_calling_its_base_runs_the_hooks_once():
    class Halved(optim.SGD):
        def step(self, closure=None):
            for g in self.param_groups:
                g["lr"] = 0.5 * g["initial"]
            return super().step(closure)

    p = _param(staged)
    p.grad = staged.ones(2, 2)
    opt = Halved([{"params": [p], "initial": 1.0}], lr=1.0)
    log = []
    opt.register_step_pre_hook(lambda o, a, k: log.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: log.append("post"))
    opt.step()
    assert log == ["pre", "post"]
    assert_close(p, staged.tensor([[0.5, -2.5], [0.0, 2.5]]))


def test_scheduler_sees_a_hooked_step():
    """The step hooks' wrapper notes the step for the schedulers (no order warning)."""
    for lib in (staged, torch):
        p = _param(lib)
        opt = lib.optim.SGD([p], lr=0.1)
        sched = lib.optim.lr_scheduler.StepLR(opt, 1)
        opt.register_step_pre_hook(lambda o, a, k: None)
        p.grad = lib.ones(2, 2)
        opt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sched.step()


def _trainer(model, log):
    opt = optim.SGD(model.parameters(), lr=0.1)

    def halve(o, args, kwargs):
        log.append("pre")
        for p in model.parameters():
            p.grad.mul_(0.5)

    opt.register_step_pre_hook(halve)
    opt.register_step_post_hook(lambda o, a, k: log.append("post"))

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def test_compiled_step_runs_its_hooks_when_traced():
    staged.manual_seed(0)
    eager_model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
    compiled_model = copy.deepcopy(eager_model)
    eager_log, compiled_log = [], []
    eager_step = _trainer(eager_model, eager_log)
    step = staged.compile(_trainer(compiled_model, compiled_log))
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = staged.tensor(rng.standard_normal((5, 4)).astype(np.float32))
        y = staged.tensor(rng.integers(0, 3, 5))
        assert_close(step(x, y), eager_step(x, y), rtol=1e-5, atol=1e-6)
    for p, q in zip(compiled_model.parameters(), eager_model.parameters()):
        assert_close(p, q, rtol=1e-5, atol=1e-6)  # the halved gradients, every call
    assert eager_log == ["pre", "post"] * 4
    # run by each trace (the first call's, and the next with .grad set), not by each call
    assert step.traces == 2 and compiled_log == ["pre", "post"] * 2


def test_deprecated_lr_scheduler_base_subclassed_as_torch():
    def run(lib):
        class Halving(lib.optim.lr_scheduler._LRScheduler):
            def get_lr(self):
                return [base * 0.5**self.last_epoch for base in self.base_lrs]

        opt = lib.optim.SGD([_param(lib)], lr=1.0)
        sched = Halving(opt)
        lrs = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a user's get_lr outside step() does not warn
            sched.get_lr()
            for _ in range(3):
                opt.step()
                sched.step()
                lrs.append(sched.get_last_lr())
        return lrs, sorted(sched.state_dict()), type(sched).__mro__[1].__name__

    (ours, our_keys, our_base), (theirs, _, their_base) = both(run)
    assert ours == theirs == [[0.5], [0.25], [0.125]]
    assert our_base == their_base == "_LRScheduler"
    assert "optimizer" not in our_keys and "base_lrs" in our_keys
    assert issubclass(optim.lr_scheduler._LRScheduler, optim.lr_scheduler.LRScheduler)
