"""Stochastic weight averaging and EMA of a model, as ``torch.optim.swa_utils``: the
averaging functions, ``AveragedModel``, ``update_bn`` and the ``SWALR`` scheduler.

Note [averaging in a compiled step]: ``update_parameters`` copies the model at its first
call and averages at the later ones, a Python branch on ``n_averaged``'s value, which a
trace cannot read (an EMA updated inside a compiled step raised ``CaptureError``). Under
capture both are computed and ``where(n_averaged == 0, copy, average)`` picks one, so one
trace serves the first call and the later ones alike, with eager's values.
"""

from __future__ import annotations

import math
from copy import deepcopy
from itertools import chain

from .. import dtypes as dt
from ..eager.factories import tensor
from ..eager.grad_mode import no_grad
from ..eager.interceptor import current_interceptor
from ..eager.tensor import Tensor
from ..nn.module import Module
from ..nn.modules.normalization import _BatchNorm
from .lr_scheduler import LRScheduler, _format_param

__all__ = [
    "AveragedModel",
    "update_bn",
    "SWALR",
    "get_ema_multi_avg_fn",
    "get_swa_multi_avg_fn",
    "get_ema_avg_fn",
    "get_swa_avg_fn",
]


def _lerp_(start, end, weight) -> None:
    """``start.lerp_(end, weight)`` for a number or 0-d tensor ``weight``, in torch's two
    formulas (for a tensor, picked by a select: a compiled step cannot branch on it)."""
    if isinstance(weight, Tensor):
        near = start + weight * (end - start)
        start.copy_(near.where(weight.abs() < 0.5, end - (end - start) * (1 - weight)))
    elif abs(weight) < 0.5:
        start.copy_(start + weight * (end - start))
    else:
        start.copy_(end - (end - start) * (1 - weight))


def _check_decay(decay) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(
            f"Invalid decay value {decay} provided. Please provide a value in [0,1] range."
        )


def get_ema_multi_avg_fn(decay=0.999):
    """``(averaged list, current list, n) -> None``: an exponential moving average in place,
    ``avg = decay * avg + (1 - decay) * current``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        if ema_param_list[0].is_floating_point() or ema_param_list[0].is_complex():
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                _lerp_(p_ema, p_model, 1 - decay)
        else:
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """``(averaged list, current list, n) -> None``: the running mean of the ``n + 1``
    models in place."""

    @no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        if averaged_param_list[0].is_floating_point() or averaged_param_list[0].is_complex():
            weight = 1 / (num_averaged + 1)
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                _lerp_(p_avg, p_model, weight)
        else:
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                diff = p_model - p_avg
                if isinstance(num_averaged, Tensor):
                    p_avg.addcdiv_(diff, num_averaged + 1)
                else:
                    p_avg.add_(diff, alpha=1.0 / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """``(averaged, current, n) -> new average``: an exponential moving average."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """``(averaged, current, n) -> new average``: the running mean of ``n + 1`` models."""

    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` (in ``.module``; on ``device`` if given) whose parameters (with
    ``use_buffers`` also buffers) ``update_parameters(model)`` averages with ``model``'s:
    the first call copies them, the later ones apply ``avg_fn`` (one tensor at a time) or
    ``multi_avg_fn`` (lists of one device and dtype), by default the equal-weight mean
    (SWA). ``n_averaged`` (an int64 buffer) counts the calls; without ``use_buffers`` the
    buffers are copied. Calling it calls the copy."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=dt.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _average(self, averaged, current) -> None:
        """Average ``current`` into ``averaged`` in place (``n_averaged`` models so far)."""
        if self.multi_avg_fn is not None:
            groups: dict = {}  # torch's grouping by device and dtype, in order
            for a, c in zip(averaged, current):
                group = groups.setdefault((a.device, a.dtype), ([], []))
                group[0].append(a)
                group[1].append(c)
            for (device, _), (a_list, c_list) in groups.items():
                self.multi_avg_fn(a_list, c_list, self.n_averaged.to(device))
        else:  # torch's CPU path: the default is the SWA mean one tensor at a time
            avg_fn = get_swa_avg_fn() if self.avg_fn is None else self.avg_fn
            for a, c in zip(averaged, current):
                a.copy_(avg_fn(a, c, self.n_averaged.to(a.device)))

    @no_grad()
    def update_parameters(self, model) -> None:
        if self.use_buffers:
            ours = chain(self.module.parameters(), self.module.buffers())
            theirs = chain(model.parameters(), model.buffers())
        else:
            ours, theirs = self.parameters(), model.parameters()
        averaged, current = [], []
        for p_averaged, p_model in zip(ours, theirs):
            averaged.append(p_averaged.detach())
            current.append(p_model.detach().to(p_averaged.device))
        if current_interceptor() is not None:  # Note [averaging in a compiled step]
            new = [a.clone() for a in averaged]
            self._average(new, current)
            first = self.n_averaged == 0
            for a, n, c in zip(averaged, new, current):
                a.copy_(c.where(first, n))
        elif bool(self.n_averaged == 0):
            for a, c in zip(averaged, current):
                a.copy_(c)
        else:
            self._average(averaged, current)
        if not self.use_buffers:
            for b_swa, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        self.n_averaged.add_(1)


@no_grad()
def update_bn(loader, model, device=None) -> None:
    """Recompute the running statistics of ``model``'s BatchNorm layers in one pass over
    ``loader`` (batches: tensors, or lists or tuples whose first item is the input, moved
    to ``device`` if given), as cumulative averages; the model's mode and the layers'
    momentum are restored after."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for input in loader:
        if isinstance(input, (list, tuple)):
            input = input[0]
        if device is not None:
            input = input.to(device)
        model(input)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to ``swa_lr`` (one, or one per group) over ``anneal_epochs``
    epochs, by a cosine or linearly (``anneal_strategy``), then hold it there."""

    _unsaved = ("optimizer", "anneal_func")

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        swa_lrs = _format_param("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _set_anneal_func(self, anneal_strategy) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = _cosine_anneal if anneal_strategy == "cos" else _linear_anneal

    def get_lr(self):
        # torch's recursive form: the lr the schedule started from, recovered from the
        # current one, then moved on by one epoch
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [
            g["swa_lr"] * alpha + _initial_lr(g["lr"], g["swa_lr"], prev_alpha) * (1 - alpha)
            for g in self.optimizer.param_groups
        ]

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self._set_anneal_func(self._anneal_strategy)


def _linear_anneal(t):
    return t


def _cosine_anneal(t):
    return (1 - math.cos(math.pi * t)) / 2


def _initial_lr(lr, swa_lr, alpha):
    """The lr that annealing by ``alpha`` toward ``swa_lr`` took to ``lr``."""
    if alpha == 1:
        return swa_lr
    return (lr - alpha * swa_lr) / (1 - alpha)
