# DP-SGD with per-sample gradients computed by torch.func, in the manner of PyTorch's
# "Per-sample-gradients" tutorial and Opacus' idea (written for this suite; synthetic
# images instead of MNIST): a small CNN's parameters and buffers detached into dicts,
# a loss of functional_call on one sample unsqueezed into a batch of one,
# vmap(grad(compute_loss), in_dims=(None, None, 0, 0)) for the per-sample gradients,
# each sample's gradient clipped to a max L2 norm across all parameters, Gaussian noise
# of std noise_multiplier * max_norm from torch.normal added to the sum, the average
# written to p.grad, then optimizer.step().
# compat: step=train_step loss="loss: (\S+)"
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

torch.manual_seed(0)

BATCH, N_CLASSES = 16, 4
MAX_GRAD_NORM, NOISE_MULTIPLIER, LR = 1.0, 0.5, 0.1


class SampleConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.fc1 = nn.Linear(16 * 2 * 2, 32)
        self.fc2 = nn.Linear(32, N_CLASSES)

    def forward(self, x):
        x = F.relu(self.conv1(x))  # 1x12x12 -> 8x12x12
        x = F.max_pool2d(x, 2, 2)  # -> 8x6x6
        x = F.relu(self.conv2(x))  # -> 16x4x4
        x = F.max_pool2d(x, 2, 2)  # -> 16x2x2
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def make_data(n):
    """Images whose class sets which quadrant is bright."""
    labels = torch.randint(0, N_CLASSES, (n,))
    x = torch.randn(n, 1, 12, 12) * 0.5
    for c in range(N_CLASSES):
        r, q = divmod(c, 2)
        x[labels == c, :, r * 6 : r * 6 + 6, q * 6 : q * 6 + 6] += 1.0
    return x, labels


model = SampleConvNet()
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
data, targets = make_data(256)


def compute_loss(params, buffers, sample, target):
    batch = sample.unsqueeze(0)
    targets = target.unsqueeze(0)
    predictions = functional_call(model, (params, buffers), (batch,))
    return F.cross_entropy(predictions, targets)


ft_compute_sample_grad = vmap(grad(compute_loss), in_dims=(None, None, 0, 0))


def train_step(x, y):
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    per_sample_grads = ft_compute_sample_grad(params, buffers, x, y)

    # clip each sample's whole gradient to MAX_GRAD_NORM (Opacus' flat clipping)
    per_sample_norms = torch.stack(
        [g.reshape(g.shape[0], -1).norm(2, dim=1) for g in per_sample_grads.values()], dim=1
    ).norm(2, dim=1)
    clip_factor = (MAX_GRAD_NORM / (per_sample_norms + 1e-6)).clamp(max=1.0)

    optimizer.zero_grad(set_to_none=True)
    for name, p in model.named_parameters():
        g = per_sample_grads[name]
        summed = torch.einsum("i,i...->...", clip_factor, g)
        noise = torch.normal(
            mean=0.0, std=NOISE_MULTIPLIER * MAX_GRAD_NORM, size=p.shape, device=p.device
        )
        p.grad = (summed + noise) / x.shape[0]
    optimizer.step()

    with torch.no_grad():
        loss = F.cross_entropy(model(x), y)
    return loss, per_sample_norms.mean()


for epoch in range(2):
    perm = torch.randperm(data.shape[0])
    for i in range(0, data.shape[0], BATCH):
        idx = perm[i : i + BATCH]
        loss, norm = train_step(data[idx], targets[idx])
        step = epoch * (data.shape[0] // BATCH) + i // BATCH
        if step % 8 == 7:
            print(
                f"step {step + 1} loss: {loss.item():.6f} mean per-sample norm: {norm.item():.4f}"
            )
