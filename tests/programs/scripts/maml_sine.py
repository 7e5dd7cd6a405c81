# MAML on sine-wave regression (Finn et al. 2017, section 5.1) in the manner of the
# torch.func MAML examples and of higher-free MAML repos: a 1-40-40-1 ReLU MLP, tasks of
# random amplitude and phase sampled with NumPy, an inner loop of a few SGD steps on a
# dict of adapted parameters run through torch.func.functional_call, the inner
# gradients by torch.autograd.grad(create_graph=True) so that the query loss
# backpropagates through the inner loop (second-order MAML), the meta-gradient averaged
# over a meta-batch of tasks, Adam as the meta-optimizer (written for this suite; fewer
# meta-iterations; the step compiled is the meta-update).
# compat: step=meta_step loss="meta loss: (\S+)"
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call

torch.manual_seed(0)
rng = np.random.RandomState(0)

n_inner_iter = 3
inner_lr = 0.01
meta_lr = 1e-3
tasks_per_batch = 3
K = 10  # support (and query) points per task


class SineNet(nn.Module):
    def __init__(self, hidden=40):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(1, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x)


def sample_tasks(n_tasks, k):
    """Support and query sets of ``n_tasks`` sine tasks, each [n_tasks, k, 1]."""
    amps = rng.uniform(0.1, 5.0, size=(n_tasks, 1, 1))
    phases = rng.uniform(0.0, np.pi, size=(n_tasks, 1, 1))
    x_spt = rng.uniform(-5.0, 5.0, size=(n_tasks, k, 1))
    x_qry = rng.uniform(-5.0, 5.0, size=(n_tasks, k, 1))
    y_spt = amps * np.sin(x_spt - phases)
    y_qry = amps * np.sin(x_qry - phases)
    to = lambda a: torch.from_numpy(a).float()
    return to(x_spt), to(y_spt), to(x_qry), to(y_qry)


model = SineNet()
meta_opt = torch.optim.Adam(model.parameters(), lr=meta_lr)


def adapt(params, x, y, steps=n_inner_iter, create_graph=True):
    """A few steps of SGD on the support set, from ``params``; the adapted params."""
    for _ in range(steps):
        pred = functional_call(model, params, (x,))
        inner_loss = F.mse_loss(pred, y)
        grads = torch.autograd.grad(inner_loss, list(params.values()), create_graph=create_graph)
        params = {name: w - inner_lr * g for (name, w), g in zip(params.items(), grads)}
    return params


def meta_step(x_spt, y_spt, x_qry, y_qry):
    meta_opt.zero_grad()
    params = dict(model.named_parameters())
    qry_losses = []
    for i in range(x_spt.size(0)):
        fast_weights = adapt(params, x_spt[i], y_spt[i])
        qry_pred = functional_call(model, fast_weights, (x_qry[i],))
        qry_loss = F.mse_loss(qry_pred, y_qry[i])
        qry_losses.append(qry_loss.detach())
        # accumulate the meta-gradient task by task, averaged over the meta-batch
        (qry_loss / x_spt.size(0)).backward()
    meta_opt.step()
    return torch.stack(qry_losses).mean()


for it in range(30):
    x_spt, y_spt, x_qry, y_qry = sample_tasks(tasks_per_batch, K)
    meta_loss = meta_step(x_spt, y_spt, x_qry, y_qry)
    if it % 5 == 4:
        print(f"iter {it + 1:3d} meta loss: {meta_loss.item():.6f}")

# Test-time adaptation on a held-out task: loss before and after the inner loop.
x_spt, y_spt, x_qry, y_qry = sample_tasks(1, K)
params = {k: v.detach() for k, v in model.named_parameters()}
with torch.no_grad():
    before = F.mse_loss(functional_call(model, params, (x_qry[0],)), y_qry[0]).item()
params = {k: v.requires_grad_() for k, v in params.items()}
adapted = adapt(params, x_spt[0], y_spt[0], steps=10, create_graph=False)
with torch.no_grad():
    after = F.mse_loss(functional_call(model, adapted, (x_qry[0],)), y_qry[0]).item()
print(f"held-out task: query mse {before:.4f} before adaptation, {after:.4f} after")
assert math.isfinite(after)
