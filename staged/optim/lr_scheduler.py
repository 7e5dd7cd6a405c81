"""Learning-rate schedulers as in ``torch.optim.lr_scheduler``, with torch's (chainable)
formulas, so a schedule gives the same learning rates to the last bit.

A scheduler writes ``param_groups[i]["lr"]`` (OneCycleLR and CyclicLR also ``momentum``
or ``betas``); a compiled step reads them at every call (Note [hyper-parameters] in
``optimizer.py``), so ``scheduler.step()`` between compiled calls takes effect with no
re-trace. Inside a compiled step, ``step()`` (any scheduler's, a subclass's too) is not
run by the trace but by every call of the step, after the step has read the lr (Note
[deferred calls] in ``staged/tracing/draws.py``): as eagerly, the lr changes once per call.
"""

from __future__ import annotations

import functools
import math
import types
import warnings
from bisect import bisect_right
from collections import Counter
from functools import partial

from ..autodiff.avals import EagerOnlyError
from ..eager.interceptor import current_interceptor
from ..eager.tensor import Tensor
from .optimizer import Optimizer

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available. "
    "Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose."
)


def _check_optimizer(optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _set_lr(group: dict, lr) -> None:
    """``group["lr"] = lr``, or, where the group's lr is a tensor (``lr=torch.tensor(0.01)``),
    ``lr`` written into it, as torch's schedulers do: the caller's tensor follows the
    schedule and stays the group's."""
    if isinstance(group["lr"], Tensor):
        group["lr"].fill_(lr)
    else:
        group["lr"] = lr


def _copied(lr):
    """``lr``, a tensor cloned (torch's ``initial_lr`` and ``get_last_lr()`` do not alias
    the group's tensor, which ``_set_lr`` writes)."""
    return lr.clone() if isinstance(lr, Tensor) else lr


def _fn_state(f):
    """What torch saves of a user's function: a callable object's ``__dict__``, None for
    a function, a lambda or None."""
    return None if f is None or isinstance(f, types.FunctionType) else f.__dict__.copy()


def _format_param(name: str, optimizer: Optimizer, param) -> list:
    """One value per param group: ``param`` repeated, or a list of the right length."""
    n = len(optimizer.param_groups)
    if isinstance(param, (list, tuple)):
        if len(param) != n:
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. "
                f"{name} has {len(param)} values, param_groups has {n}."
            )
        return list(param)
    return [param] * n


def _deferrable(step):
    """``step`` made, under a ``staged.compile`` trace, by every call of the compiled step
    rather than by the trace (Note [deferred calls]); eagerly, at once. Not deferred: a
    scheduler's first step (made by its constructor), one on an optimizer made in the
    trace (its numbers are the call's own constants) and ``ReduceLROnPlateau.step(loss)``
    of a tensor, which needs its data (the trace raises ``CaptureError``)."""

    @functools.wraps(step)
    def deferrable(self, *args, **kwargs):
        icpt = current_interceptor()
        opt = self.optimizer
        made = getattr(opt, "_made_in", None)
        if (
            icpt is None
            or self._is_initial
            or (made is not None and made() is icpt)
            or any(isinstance(a, Tensor) for a in (*args, *kwargs.values()))
        ):
            return step(self, *args, **kwargs)
        live = getattr(opt, "_live", {})
        icpt.defer(
            functools.partial(step, self, *args, **kwargs),
            f"{type(self).__name__}.step()",
            lambda t: any(t is v for v in live.values()),
        )
        return None

    return deferrable


_STEP_ORDER_WARNING = (
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
    "later, you should call them in the opposite order: `optimizer.step()` before "
    "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
    "value of the learning rate schedule. See more details at "
    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate"
)


def _warns_outside_step(get_lr):
    """``get_lr`` warning when called other than by ``step()``, as torch's."""

    @functools.wraps(get_lr)
    def warned(self):
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, please use "
                "`get_last_lr()`.",
                UserWarning,
                stacklevel=2,
            )
        return get_lr(self)

    return warned


class LRScheduler:
    """Base class: subclasses give ``get_lr()``, the next learning rate of each group, and
    where torch has one ``_get_closed_form_lr()``, the rate at ``last_epoch`` from
    ``base_lrs`` (used by ``step(epoch)`` and by ``SequentialLR`` at a milestone)."""

    _is_initial = False
    _get_lr_called_within_step = False  # torch's name: get_lr() outside step() warns
    _unsaved: tuple = ("optimizer",)  # attributes state_dict() leaves out, as torch

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:  # Note [deferred calls]: a user's scheduler's too
            cls.step = _deferrable(cls.__dict__["step"])
        if "get_lr" in cls.__dict__ and cls.__module__.startswith(__package__):
            cls.get_lr = _warns_outside_step(cls.__dict__["get_lr"])  # torch's own schedulers

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        for i, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", _copied(group["lr"]))
            elif "initial_lr" not in group:
                raise KeyError(
                    f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                    "scheduler with last_epoch >= 0.\nThis typically happens when:\n1. You're "
                    "trying to resume training from a checkpoint but haven't properly loaded "
                    "the optimizer state\n2. You're using last_epoch >= 0 for a fresh training "
                    "run (not recommended)"
                )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        vars(optimizer).setdefault("_opt_called", False)  # its steps from now on: note_step
        self._initial_step()

    def _initial_step(self) -> None:
        """The step a scheduler takes when made: ``get_lr()`` sees ``_is_initial``."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list:
        raise NotImplementedError

    def _next_lrs(self) -> list:
        """``get_lr()`` as ``step()`` calls it (no warning)."""
        self._get_lr_called_within_step = True
        try:
            return self.get_lr()
        finally:
            self._get_lr_called_within_step = False

    def get_last_lr(self) -> list:
        """The learning rates the last ``step()`` set."""
        return self._last_lr

    @_deferrable
    def step(self, epoch=None) -> None:
        """Advance one epoch (call it after ``optimizer.step()``); a given ``epoch`` is
        deprecated, as in torch, and uses the closed form where there is one."""
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(_STEP_ORDER_WARNING, UserWarning, stacklevel=3)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None) -> None:
        if epoch is None:
            self.last_epoch += 1
            values = self._next_lrs()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self._next_lrs()
        self._set_lrs(values)

    def _set_lrs(self, values) -> None:
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            _set_lr(group, lr)
        self._last_lr = self._lrs()

    def _lrs(self) -> list:
        return [_copied(group["lr"]) for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """Every attribute but the optimizer (and ``_unsaved``), as torch."""
        return {k: v for k, v in self.__dict__.items() if k not in self._unsaved}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


class _LRScheduler(LRScheduler):
    """torch's old name of ``LRScheduler``, kept for the schedulers that subclass it (a
    class, not an alias, so its ``__name__`` is its own, as torch's)."""


class _LambdaScheduler(LRScheduler):
    """A scheduler driven by one function of the epoch per group (not saved: a function)."""

    _unsaved = ("optimizer", "lr_lambdas")

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for f in self.lr_lambdas:
            if not callable(f):
                raise TypeError(f"lr_lambda should be a function, but got {type(f).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        """As torch: a callable object's ``__dict__`` per group, None for a function."""
        return {**super().state_dict(), "lr_lambdas": [_fn_state(f) for f in self.lr_lambdas]}

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        for f, saved in zip(self.lr_lambdas, state_dict.pop("lr_lambdas", ())):
            if saved is not None:
                f.__dict__.update(saved)
        super().load_state_dict(state_dict)


class LambdaLR(_LambdaScheduler):
    """``initial_lr * lr_lambda(epoch)``; one function, or one per group."""

    def get_lr(self):
        return [base * f(self.last_epoch) for f, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaScheduler):
    """Multiply by ``lr_lambda(epoch)`` every epoch; one function, or one per group."""

    def get_lr(self):
        if self._is_initial:
            return self._lrs()
        return [lr * f(self.last_epoch) for f, lr in zip(self.lr_lambdas, self._lrs())]


class StepLR(LRScheduler):
    """Multiply by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply by ``gamma`` at each milestone epoch."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return self._lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]

    def _get_closed_form_lr(self):
        n = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma**n for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """Multiply by ``factor`` until epoch ``total_iters``."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._lrs()]
        if self.last_epoch != self.total_iters:
            return self._lrs()
        return [lr * (1.0 / self.factor) for lr in self._lrs()]

    def _get_closed_form_lr(self):
        return [
            base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
            for base in self.base_lrs
        ]


class ExponentialLR(LRScheduler):
    """Multiply by ``gamma`` every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return self._lrs() if self._is_initial else [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self):
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale from ``start_factor`` to ``end_factor`` linearly over ``total_iters``."""

    def __init__(
        self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1
    ):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(
                "Starting multiplicative factor expected to be greater than 0 "
                "and less or equal to 1."
            )
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._lrs()]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._lrs()
        d = self.end_factor - self.start_factor
        return [
            lr * (1.0 + d / (self.total_iters * self.start_factor + (self.last_epoch - 1) * d))
            for lr in self._lrs()
        ]

    def _get_closed_form_lr(self):
        return [
            base
            * (
                self.start_factor
                + (self.end_factor - self.start_factor)
                * min(self.total_iters, self.last_epoch)
                / self.total_iters
            )
            for base in self.base_lrs
        ]


class PolynomialLR(LRScheduler):
    """``initial_lr * (1 - epoch / total_iters) ** power``, in torch's chainable form."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._lrs()
        e, n = self.last_epoch, self.total_iters
        decay = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
        return [lr * decay for lr in self._lrs()]

    def _get_closed_form_lr(self):
        return [
            base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
            for base in self.base_lrs
        ]


def _cosine(lo, hi, e, t):
    """``lo + (hi - lo) * (1 + cos(pi * e / t)) / 2``, in torch's order."""
    return lo + (hi - lo) * (1 + math.cos(math.pi * e / t)) / 2


class CosineAnnealingLR(LRScheduler):
    """Cosine from the initial lr down to ``eta_min`` over ``T_max`` epochs (SGDR without
    restarts), in torch's recursive form."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._lrs()
        if self._step_count == 1 and e > 0:
            return [
                lo + (base - lo) * (1 + math.cos(e * math.pi / t)) / 2 for base in self.base_lrs
            ]
        if (e - 1 - t) % (2 * t) == 0:
            return [
                lr + (base - lo) * (1 - math.cos(math.pi / t)) / 2
                for base, lr in zip(self.base_lrs, self._lrs())
            ]
        return [
            (1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t)) * (lr - lo) + lo
            for lr in self._lrs()
        ]

    def _get_closed_form_lr(self):
        return [_cosine(self.eta_min, base, self.last_epoch, self.T_max) for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: cosine from the initial lr to ``eta_min`` over ``T_i`` epochs, then a restart
    with ``T_i *= T_mult``. ``step(epoch)`` takes fractional epochs (per batch)."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(
                f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}"
            )
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [_cosine(self.eta_min, base, self.T_cur, self.T_i) for base in self.base_lrs]

    def step(self, epoch=None):
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        elif epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult**n
        else:
            self.T_i = self.T_0
            self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._set_lrs(self._next_lrs())


class _MomentumCycler(LRScheduler):
    """A scheduler that can cycle the momentum (or Adam's ``beta1``) inversely to the lr."""

    def _init_momentum(self, optimizer, cycle_momentum, last_epoch, **bounds) -> dict:
        """With ``cycle_momentum``: ``bounds`` (``base_momentum``, ``max_momentum``) as one
        value per group, formatted in the order given (torch's, for its errors); when
        starting, each group's momentum set to its max and both bounds kept in the group."""
        self.cycle_momentum = cycle_momentum
        if not cycle_momentum:
            return {}
        if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
            raise ValueError(
                "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
            )
        self.use_beta1 = "betas" in optimizer.defaults
        values = {k: _format_param(k, optimizer, v) for k, v in bounds.items()}
        if last_epoch == -1:
            for group, b, m in zip(
                optimizer.param_groups, values["base_momentum"], values["max_momentum"]
            ):
                self._set_momentum(group, m)
                group["max_momentum"], group["base_momentum"] = m, b
        return values

    def _set_momentum(self, group, m) -> None:
        if self.use_beta1:
            group["betas"] = (m, *group["betas"][1:])
        else:
            group["momentum"] = m


class CyclicLR(_MomentumCycler):
    """Cyclical learning rates (CLR): each group's lr goes from ``base_lr`` up to
    ``max_lr`` over ``step_size_up`` steps and back over ``step_size_down``, its amplitude
    scaled by ``mode`` (``triangular``: 1, ``triangular2``: halved every cycle,
    ``exp_range``: ``gamma ** step``) or ``scale_fn`` of the cycle or step
    (``scale_mode``); with ``cycle_momentum`` the momentum (or Adam's ``beta1``) moves
    inversely between ``max_momentum`` and ``base_momentum``. Step it after every batch."""

    _unsaved = ("optimizer", "_scale_fn_ref", "_scale_fn_custom")

    def __init__(
        self,
        optimizer,
        base_lr,
        max_lr,
        step_size_up=2000,
        step_size_down=None,
        mode="triangular",
        gamma=1.0,
        scale_fn=None,
        scale_mode="cycle",
        cycle_momentum=True,
        base_momentum=0.8,
        max_momentum=0.9,
        last_epoch=-1,
    ):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set_lr(group, lr)
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ["triangular", "triangular2", "exp_range"] and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom, self.scale_mode = scale_fn, scale_mode
        self._init_scale_fn()
        momenta = self._init_momentum(
            optimizer,
            cycle_momentum,
            last_epoch,
            base_momentum=base_momentum,
            max_momentum=max_momentum,
        )
        if momenta:
            self.base_momentums, self.max_momentums = momenta.values()
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        """The scale function ``mode`` names, and its ``scale_mode``, unless ``scale_fn``."""
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref, self.scale_mode = _triangular_scale, "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref, self.scale_mode = _triangular2_scale, "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = partial(_exp_range_scale, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [
            base + (top - base) * scale_factor * scale
            for base, top in zip(self.base_lrs, self.max_lrs)
        ]
        if self.cycle_momentum:
            for group, base, top in zip(
                self.optimizer.param_groups, self.base_momentums, self.max_momentums
            ):
                self._set_momentum(group, top - (top - base) * scale_factor * scale)
        return lrs

    def state_dict(self):
        """As torch: a callable ``scale_fn`` object's ``__dict__``, None for a function."""
        return {**super().state_dict(), "_scale_fn_custom": _fn_state(self._scale_fn_custom)}

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        saved = state_dict.pop("_scale_fn_custom")
        super().load_state_dict(state_dict)
        if saved is not None:
            self._scale_fn_custom.__dict__.update(saved)
        self._init_scale_fn()


def _triangular_scale(x):
    return 1.0


def _triangular2_scale(x):
    return 1 / (2.0 ** (x - 1))


def _exp_range_scale(gamma, x):
    return gamma**x


class OneCycleLR(_MomentumCycler):
    """The 1cycle policy: lr from ``max_lr / div_factor`` up to ``max_lr`` over
    ``pct_start`` of ``total_steps``, then down to ``initial_lr / final_div_factor``
    (``three_phase``: back to the initial lr first); with ``cycle_momentum`` the momentum
    (or Adam's ``beta1``) moves inversely between ``base_momentum`` and ``max_momentum``.
    Step it after every batch."""

    def __init__(
        self,
        optimizer,
        max_lr,
        total_steps=None,
        epochs=None,
        steps_per_epoch=None,
        pct_start=0.3,
        anneal_strategy="cos",
        cycle_momentum=True,
        base_momentum=0.85,
        max_momentum=0.95,
        div_factor=25.0,
        final_div_factor=1e4,
        three_phase=False,
        last_epoch=-1,
    ):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(
                    f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}"
                )
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        # each phase: its end step, then the group keys of its start and end lr and momentum
        n, rise = self.total_steps, ("initial_lr", "max_lr", "max_momentum", "base_momentum")
        if three_phase:
            phases = [
                (float(pct_start * n) - 1, *rise),
                (
                    float(2 * pct_start * n) - 2,
                    "max_lr",
                    "initial_lr",
                    "base_momentum",
                    "max_momentum",
                ),
                (n - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            phases = [
                (float(pct_start * n) - 1, *rise),
                (n - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        keys = ("end_step", "start_lr", "end_lr", "start_momentum", "end_momentum")
        self._schedule_phases = [dict(zip(keys, phase)) for phase in phases]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self._anneal_func_type = anneal_strategy
        max_lrs = _format_param("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, m in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self._init_momentum(
            optimizer,
            cycle_momentum,
            last_epoch,
            max_momentum=max_momentum,
            base_momentum=base_momentum,
        )
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(
                f"Tried to step {step_num} times. The specified number of total "
                f"steps is {self.total_steps}"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        self._set_momentum(
                            group,
                            self._anneal(
                                group[phase["start_momentum"]], group[phase["end_momentum"]], pct
                            ),
                        )
                    break
                start_step = end_step
        return lrs


class _Composite(LRScheduler):
    """A scheduler made of others (``_schedulers``), saved with theirs."""

    _unsaved = ("optimizer", "_schedulers")

    def _check(self, schedulers, optimizer) -> None:
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(
                    f"{type(self).__name__} at index {i} should have `optimizer` as its attribute."
                )
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(
                    f"{type(self).__name__} does not support `ReduceLROnPlateau` scheduler as "
                    "it requires additional kwargs to be specified when calling `step`, but "
                    f"got one at index {i} in the given schedulers sequence."
                )
            if optimizer != s.optimizer:
                raise ValueError(
                    f"{type(self).__name__} expects all schedulers to belong to the same "
                    f"optimizer, but got scheduler {type(s).__name__} at index {i} has "
                    f"{s.optimizer}, which is different from {type(optimizer).__name__}."
                )

    def state_dict(self):
        return {**super().state_dict(), "_schedulers": [s.state_dict() for s in self._schedulers]}

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        for s, saved in zip(self._schedulers, state_dict.pop("_schedulers")):
            s.load_state_dict(saved)
        self.__dict__.update(state_dict)


class SequentialLR(_Composite):
    """``schedulers[i]`` from ``milestones[i - 1]`` on; each starts afresh (from the initial
    lr, by its closed form where it has one) at its milestone."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError(
                f"{type(self).__name__} expects at least one scheduler, but got no scheduler."
            )
        self._check(schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                "than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to "
                f"{len(milestones)}"
            )
        self._schedulers, self._milestones = schedulers, milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:  # undo what the schedulers did when made
            _set_lr(group, group["initial_lr"])
        self.recursive_undo()
        first = schedulers[bisect_right(milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def recursive_undo(self, sched=None) -> None:
        """Take back the initial step of every (nested) scheduler."""
        sched = self if sched is None else sched
        if hasattr(sched, "_schedulers"):
            for s in sched._schedulers:
                self.recursive_undo(s)
        elif hasattr(sched, "last_epoch"):
            sched.last_epoch -= 1

    def step(self):
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite):
    """Step every scheduler in turn at each ``step()``: their factors multiply."""

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError(
                f"{type(self).__name__} expects at least one scheduler to be "
                "chained, but got no scheduler."
            )
        optimizer = optimizer or schedulers[0].optimizer
        self._check(schedulers, optimizer)
        self._schedulers, self.optimizer = schedulers, optimizer
        self._last_lr = self._lrs()

    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = self._lrs()


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` (not below ``min_lr``) when the metric given to
    ``step(metric)`` has not improved for more than ``patience`` epochs; then wait
    ``cooldown`` epochs. ``threshold``/``threshold_mode`` say what counts as better."""

    def __init__(
        self,
        optimizer,
        mode="min",
        factor=0.1,
        patience=10,
        threshold=1e-4,
        threshold_mode="rel",
        cooldown=0,
        min_lr=0,
        eps=1e-8,
    ):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"expected {n} min_lrs, got {len(min_lr)}")
            self.default_min_lr, self.min_lrs = None, list(min_lr)
        else:
            self.default_min_lr, self.min_lrs = min_lr, [min_lr] * n
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.last_epoch = 0
        self._last_lr = self._lrs()
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None):
        if isinstance(metrics, Tensor) and current_interceptor() is not None:
            raise EagerOnlyError(  # (a RuntimeError, which fallback="eager" runs eagerly)
                "ReduceLROnPlateau.step(metric) reads the metric's value to decide whether "
                "to lower the learning rate, which a compiled step cannot look at while "
                "it is traced: call scheduler.step(loss) after the compiled step, on the "
                "loss it returns, or compile with fallback='eager'"
            )
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = self._lrs()

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), "
                    "usually due to a new param group being added to the optimizer. Please "
                    "modify the `min_lrs` field to match the length of the `optimizer` "
                    "param groups."
                )
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                _set_lr(group, new_lr)

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a, best) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode) -> None:
        if mode not in {"min", "max"}:
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in {"rel", "abs"}:
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
