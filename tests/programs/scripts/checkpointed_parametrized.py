# A deep residual MLP trained with activation checkpointing, in the manner of PyTorch's
# torch.utils.checkpoint docs and memory-saving examples (each residual block run through
# checkpoint(..., use_reentrant=False)), with reparametrized layers in the manner of
# torch.nn.utils.parametrizations: weight_norm on the blocks' first Linear, spectral_norm
# on the stem and head (as in SN-GAN / Lipschitz-constrained nets), trained with SGD
# (momentum, nesterov, weight decay) under a cosine annealing learning-rate schedule.
# compat: step=train_step loss="loss (\S+)"
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import spectral_norm, weight_norm
from torch.utils.checkpoint import checkpoint


class ResBlock(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = weight_norm(nn.Linear(d, hidden))
        self.fc2 = nn.Linear(hidden, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.fc2(self.drop(F.silu(self.fc1(self.norm(x)))))


class DeepResMLP(nn.Module):
    def __init__(self, d_in=12, d=32, hidden=64, depth=6, n_out=3, use_checkpoint=True):
        super().__init__()
        self.stem = spectral_norm(nn.Linear(d_in, d))
        self.blocks = nn.ModuleList(ResBlock(d, hidden) for _ in range(depth))
        self.norm = nn.LayerNorm(d)
        self.head = spectral_norm(nn.Linear(d, n_out), n_power_iterations=2)
        self.use_checkpoint = use_checkpoint

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            if self.use_checkpoint and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.head(self.norm(x))


torch.manual_seed(0)
n, d_in = 256, 12
X = torch.randn(n, d_in)
w_true = torch.randn(d_in, 3)
Y = (torch.sin(X @ w_true) + 0.5 * (X[:, :3] ** 2)).argmax(1)

model = DeepResMLP()
print("parametrized:", [n for n, m in model.named_modules() if hasattr(m, "parametrizations")])
print("state keys:", [k for k in model.state_dict() if "blocks.0" in k or "stem" in k])
epochs, batch = 8, 32
steps = epochs * (n // batch)
optimizer = torch.optim.SGD(
    model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4
)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
criterion = nn.CrossEntropyLoss()


def train_step(x, y):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


for epoch in range(epochs):
    model.train()
    perm = torch.randperm(n)
    total = 0.0
    for i in range(0, n, batch):
        idx = perm[i : i + batch]
        loss = train_step(X[idx], Y[idx])
        scheduler.step()
        total += loss.item()
    print(f"epoch {epoch} lr {scheduler.get_last_lr()[0]:.6f} loss {total / (n // batch):.6f}")

model.eval()
with torch.no_grad():
    acc = (model(X).argmax(1) == Y).float().mean().item()
    sigma = torch.linalg.matrix_norm(model.stem.weight, ord=2).item()
    g = model.blocks[0].fc1.parametrizations.weight.original0
    v = model.blocks[0].fc1.parametrizations.weight.original1
print(f"accuracy {acc:.4f} stem sigma {sigma:.6f}")
print(
    f"wn g {g.sum().item():.6f} v {v.sum().item():.6f} u {model.stem.parametrizations.weight[0]._u.sum().item():.6f}"
)
print(f"final loss {loss.item():.6f}")
