# A small regression MLP whose optimizer step is compiled, in the manner of PyTorch's
# recipes "(beta) Compiling the optimizer with torch.compile" and "(beta) Running the
# compiled optimizer with an LR Scheduler": forward and backward run eagerly, then
# `@torch.compile(fullgraph=False) def fn(): opt.step()`; with a scheduler the lr is
# wrapped in a tensor (`lr=torch.tensor(0.01)`) so that changing it does not recompile.
# Adam with LinearLR stepped inside the compiled function (the recipe's own code), then
# AdamW with CosineAnnealingLR stepped outside it, then SGD with momentum and a plain float lr.
# compat: loss="loss: (\S+)" why="it compiles itself (torch.compile): staged's run is compiled"
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

model = nn.Sequential(
    nn.Linear(16, 64, bias=False),
    nn.Tanh(),
    nn.Linear(64, 64, bias=False),
    nn.Tanh(),
    nn.Linear(64, 1),
)
w_true = torch.randn(16, 1)
X = torch.randn(256, 16)
Y = torch.sin(X @ w_true) + 0.05 * torch.randn(256, 1)


def forward_backward(i):
    idx = torch.arange(i * 32, (i + 1) * 32) % len(X)
    out = model(X[idx])
    loss = F.mse_loss(out, Y[idx])
    loss.backward()
    return loss


# 1. the recipe: Adam, its lr a tensor, LinearLR, both stepped in the compiled function
opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
sched = torch.optim.lr_scheduler.LinearLR(opt, total_iters=5)


@torch.compile(fullgraph=False)
def fn():
    opt.step()
    sched.step()


for i in range(8):
    loss = forward_backward(i)
    fn()
    opt.zero_grad(set_to_none=True)
    print(f"adam step {i} lr {opt.param_groups[0]['lr']} loss: {loss.item():.6f}")

# 2. AdamW with decoupled weight decay; the scheduler steps outside the compiled step
opt = torch.optim.AdamW(
    model.parameters(), lr=torch.tensor(3e-3), betas=(0.9, 0.95), weight_decay=0.1
)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=1e-4)


@torch.compile(fullgraph=False)
def opt_step():
    opt.step()


for i in range(10):
    loss = forward_backward(i)
    opt_step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    lr = sched.get_last_lr()[0]
    print(f"adamw step {i} lr {float(lr):.6f} loss: {loss.item():.6f}")

# 3. SGD with momentum and a float lr (no scheduler: a float lr is a constant to the compiler)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)


@torch.compile
def sgd_step():
    opt.step()


for i in range(6):
    loss = forward_backward(i)
    sgd_step()
    opt.zero_grad()
    print(f"sgd step {i} loss: {loss.item():.6f}")

with torch.no_grad():
    final = F.mse_loss(model(X), Y)
print(f"final loss: {final.item():.6f}")
