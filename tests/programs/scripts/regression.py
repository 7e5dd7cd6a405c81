# Polynomial regression with a single Linear layer, F.smooth_l1_loss and a hand-written
# update of its parameters, stopping at a loss threshold, in the manner of PyTorch's
# regression example (written for this suite).
# compat: step=train_step rtol=5e-3 crtol=5e-3 why="float32 sums in other orders (the BLAS kernel a CPU picks; torch's own AVX2 and default kernels end 0.1 % apart), 1e-6 off at batch 100, growing as the loss falls 50-fold"
import torch
import torch.nn.functional as F

POLY_DEGREE = 4
torch.manual_seed(3)
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x):
    x = x.unsqueeze(1)
    return torch.cat([x**i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    return x.mm(W_target) + b_target.item()


def get_batch(batch_size=32):
    random = torch.randn(batch_size)
    x = make_features(random)
    return x, f(x)


fc = torch.nn.Linear(W_target.size(0), 1)


def train_step(batch_x, batch_y):
    fc.zero_grad()
    output = F.smooth_l1_loss(fc(batch_x), batch_y)
    output.backward()
    for param in fc.parameters():
        param.data.add_(-0.1 * param.grad)
    return output


for batch_idx in range(1, 301):
    loss = train_step(*get_batch()).item()
    if batch_idx % 100 == 0:
        print(f"batch {batch_idx} loss {loss:.6f}")
