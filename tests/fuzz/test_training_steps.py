"""Random training steps, compiled against the same step run eagerly, call for call: a
model drawn from a menu of layers (an MLP with normalisation, dropout and activations, a
1-D CNN, an embedding bag, a multi-layer or bidirectional RNN/LSTM/GRU), one of the
optimizers with drawn options, a loss, sometimes gradient clipping and an lr scheduler
stepped between calls, in train or eval mode. Three calls each; the losses and then every
entry of the state dict must agree.

CI runs ``CI_SEEDS`` fixed seeds (one compile each, about 3 s on 2 cores);
``STAGED_FUZZ_EXAMPLES=N`` runs N seeds instead. A failure names its seed: ``_case(seed)``
rebuilds it."""

from __future__ import annotations

import copy
import os
import random

import numpy as np
import pytest

import staged
import staged.nn.functional as F
from staged import nn, optim

CI_SEEDS = 8
SEEDS = range(int(os.environ.get("STAGED_FUZZ_EXAMPLES", "0")) or CI_SEEDS)


class _Sequence(nn.Module):
    """A 1-D CNN, an embedding bag or a recurrent layer, then a linear head."""

    def __init__(self, rng, d_in, width, d_out):
        super().__init__()
        self.kind = rng.choice(["lstm", "gru", "rnn", "conv", "embedding"])
        if self.kind == "conv":
            self.body = nn.Sequential(
                nn.Conv1d(d_in, width, 3, padding=1),
                nn.ReLU(),
                nn.MaxPool1d(2),
                nn.BatchNorm1d(width),
            )
        elif self.kind == "embedding":
            self.body = nn.Embedding(11, width, padding_idx=rng.choice([None, 0]))
        else:
            cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[self.kind]
            bidirectional = rng.random() < 0.3
            self.body = cls(
                d_in, width, rng.choice([1, 2]), batch_first=True, bidirectional=bidirectional
            )
            width *= 2 if bidirectional else 1
        self.head = nn.Linear(width, d_out)

    def forward(self, x):
        if self.kind == "conv":
            h = self.body(x.unsqueeze(-1).expand(-1, -1, 4).contiguous()).mean(-1)
        elif self.kind == "embedding":
            h = self.body((x.abs() * 3).long().clamp(max=10)).mean(1)
        else:
            h = self.body(x.unsqueeze(1).expand(-1, 3, -1))[0][:, -1]
        return self.head(h)


_LAYERS = [
    lambda w: nn.ReLU(),
    lambda w: nn.Tanh(),
    lambda w: nn.GELU(),
    lambda w: nn.SiLU(),
    lambda w: nn.ELU(),
    lambda w: nn.LeakyReLU(0.1),
    lambda w: nn.Softplus(),
    lambda w: nn.Hardtanh(),
    lambda w: nn.Mish(),
    lambda w: nn.LayerNorm(w),
    lambda w: nn.BatchNorm1d(w),
    lambda w: nn.Dropout(0.3),
    lambda w: nn.Linear(w, w),
]


def _model(rng):
    d_in, d_out = rng.choice([3, 5, 8]), rng.choice([1, 2, 4])
    if rng.random() < 0.4:
        return _Sequence(rng, d_in, rng.choice([4, 6]), d_out), d_in, d_out
    width = rng.choice([4, 6, 16])
    layers = [nn.Linear(d_in, width)]
    for _ in range(rng.randint(0, 3)):
        layer = rng.choice(_LAYERS)(width)
        if isinstance(layer, nn.BatchNorm1d) and list(layers[-1].parameters()):
            # what BatchNorm takes out of its input (a bias before it, another
            # normalisation's mean) would get gradients of rounding noise (_zero)
            layers.append(nn.ReLU())
        layers.append(layer)
    layers.append(nn.Linear(width, d_out, bias=rng.random() < 0.7))
    return nn.Sequential(*layers), d_in, d_out


# Updates normalised by the gradient's size (Adam's, Adagrad's, RMSprop's) make a gradient
# of rounding noise (an entry zero in exact arithmetic, or nearly) lr-sized, in different
# directions in the two runs: their eps is raised so that such entries stay small. Rprop,
# which steps by the gradient's sign alone, is left out for that reason.
EPS = 1e-3


def _optimizer(rng, params):
    flip = rng.random() < 0.5
    make = rng.choice(
        [
            lambda: optim.SGD(params, lr=0.05, momentum=0.9 * flip, weight_decay=0.01 * flip),
            lambda: optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True),
            lambda: optim.Adam(params, lr=0.01, eps=EPS, amsgrad=flip, weight_decay=0.01),
            lambda: optim.AdamW(params, lr=0.01, eps=EPS, weight_decay=0.1),
            lambda: optim.RMSprop(params, lr=0.01, eps=EPS, momentum=0.5, centered=flip),
            lambda: optim.Adagrad(params, lr=0.1, eps=EPS, lr_decay=0.01 * flip),
            lambda: optim.Adamax(params, lr=0.01, eps=EPS),
            lambda: optim.NAdam(params, lr=0.01, eps=EPS),
            lambda: optim.RAdam(params, lr=0.01, eps=EPS),
            lambda: optim.Adadelta(params, lr=1.0),
            lambda: optim.ASGD(params, lr=0.01),
        ]
    )
    return make()


def _loss(rng, d_out):
    name = rng.choice(["mse", "l1", "huber", "bce"] + ["cross_entropy"] * (d_out > 1))
    return {
        "mse": F.mse_loss,
        "l1": F.l1_loss,
        "huber": lambda o, y: F.smooth_l1_loss(o, y, beta=0.5),
        "bce": lambda o, y: F.binary_cross_entropy_with_logits(o, (y > 0).float()),
        "cross_entropy": lambda o, y: F.cross_entropy(o, y.argmax(-1), label_smoothing=0.1),
    }[name], name


def _case(seed):
    """Two copies of the drawn model, optimizer and scheduler, a step function over each,
    the batch size and a description."""
    rng = random.Random(seed)
    staged.manual_seed(seed)
    model, d_in, d_out = _model(rng)
    model.train(rng.random() < 0.7)
    twin = copy.deepcopy(model)
    opt = _optimizer(rng, model.parameters())
    options = {k: v for k, v in opt.defaults.items() if k != "decoupled_weight_decay"}
    twin_opt = type(opt)(twin.parameters(), **options)
    loss_fn, loss_name = _loss(rng, d_out)
    scheduled, clipped = rng.random() < 0.3, rng.random() < 0.3

    def step_of(m, o):
        def step(x, y):
            o.zero_grad()
            loss = loss_fn(m(x), y)
            loss.backward()
            if clipped:
                nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            o.step()
            return loss

        return step

    schedulers = (
        [optim.lr_scheduler.StepLR(o, 1, gamma=0.5) for o in (opt, twin_opt)] if scheduled else []
    )
    about = (
        f"seed {seed}: {model}, {type(opt).__name__}({opt.defaults}), {loss_name}, "
        f"train={model.training}, scheduled={scheduled}, clipped={clipped}"
    )
    return (
        (model, twin),
        step_of(model, opt),
        step_of(twin, twin_opt),
        schedulers,
        (d_in, d_out),
        about,
    )


def _zero(grad) -> bool:
    """Whether a gradient is zero in exact arithmetic, by the model's symmetry (a bias before
    BatchNorm, an L1 loss's signs cancelling): there it is rounding noise, which updates
    normalised by the gradient's size make lr-sized in either run (EPS), so such a
    parameter's state is not compared."""
    return float(grad.abs().max()) < 1e-6


@pytest.mark.parametrize("seed", SEEDS)
def test_a_compiled_training_step_matches_eager_call_for_call(seed):
    (model, twin), eager, step, schedulers, (d_in, d_out), about = _case(seed)
    compiled = staged.compile(step, backend="llvm-cpu")
    n = random.Random(-seed).choice([4, 8])
    quiet = set()
    for call in range(3):
        x, y = staged.randn(n, d_in), staged.randn(n, d_out)
        staged.manual_seed(1000 + call)
        want = eager(x, y).item()
        quiet |= {k for k, p in model.named_parameters() if p.grad is not None and _zero(p.grad)}
        staged.manual_seed(1000 + call)
        got = compiled(x, y).item()
        for s in schedulers:
            s.step()
        assert np.isclose(got, want, rtol=2e-4, atol=1e-5), (
            f"call {call}: {got} for {want}; {about}"
        )
    for (key, a), b in zip(model.state_dict().items(), twin.state_dict().values()):
        if key in quiet:  # see _zero
            continue
        np.testing.assert_allclose(
            b.numpy(), a.numpy(), rtol=1e-3, atol=1e-4, err_msg=f"{key}; {about}"
        )
