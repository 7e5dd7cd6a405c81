# A RealNVP normalizing flow on two-moons data in the manner of the popular 2-D RealNVP
# notebooks (senya-ashukha/real-nvp-pytorch, the "density estimation using Real NVP"
# tutorials): affine coupling layers whose alternating binary masks are registered
# buffers, a scale network ending in tanh and a translation network, the inverse pass
# x -> z summing the log-determinants, a MultivariateNormal prior, the negative
# log-likelihood minimised with Adam, and samples drawn from the prior and pushed through
# the forward pass at the end (written for this suite; the two moons are made with
# torch's RNG instead of sklearn.datasets.make_moons).
# compat: step=train_step loss="loss: (\S+)"
import math

import torch
import torch.nn as nn
from torch import distributions

torch.manual_seed(0)


def make_moons(n_samples, noise=0.05):
    n_out = n_samples // 2
    n_in = n_samples - n_out
    outer = torch.linspace(0, math.pi, n_out)
    inner = torch.linspace(0, math.pi, n_in)
    x = torch.cat([torch.cos(outer), 1 - torch.cos(inner)])
    y = torch.cat([torch.sin(outer), 1 - torch.sin(inner) - 0.5])
    X = torch.stack([x, y], dim=1)
    X += noise * torch.randn_like(X)
    return X[torch.randperm(n_samples)]


class CouplingLayer(nn.Module):
    def __init__(self, mask, hidden=64):
        super().__init__()
        self.register_buffer("mask", mask)
        dim = mask.numel()
        self.scale_net = nn.Sequential(
            nn.Linear(dim, hidden),
            nn.LeakyReLU(),
            nn.Linear(hidden, hidden),
            nn.LeakyReLU(),
            nn.Linear(hidden, dim),
            nn.Tanh(),
        )
        self.translate_net = nn.Sequential(
            nn.Linear(dim, hidden),
            nn.LeakyReLU(),
            nn.Linear(hidden, hidden),
            nn.LeakyReLU(),
            nn.Linear(hidden, dim),
        )

    def forward(self, z):
        """z -> x (sampling direction)."""
        z_masked = z * self.mask
        s = self.scale_net(z_masked) * (1 - self.mask)
        t = self.translate_net(z_masked) * (1 - self.mask)
        x = z_masked + (1 - self.mask) * (z * torch.exp(s) + t)
        return x, s.sum(dim=1)

    def inverse(self, x):
        """x -> z (density direction)."""
        x_masked = x * self.mask
        s = self.scale_net(x_masked) * (1 - self.mask)
        t = self.translate_net(x_masked) * (1 - self.mask)
        z = x_masked + (1 - self.mask) * (x - t) * torch.exp(-s)
        return z, -s.sum(dim=1)


class RealNVP(nn.Module):
    def __init__(self, n_layers=4, dim=2):
        super().__init__()
        masks = torch.tensor([[0, 1], [1, 0]] * (n_layers // 2), dtype=torch.float32)
        self.layers = nn.ModuleList([CouplingLayer(m) for m in masks])
        self.register_buffer("loc", torch.zeros(dim))
        self.register_buffer("cov", torch.eye(dim))

    @property
    def prior(self):
        return distributions.MultivariateNormal(self.loc, self.cov)

    def f(self, x):
        log_det_J = x.new_zeros(x.shape[0])
        z = x
        for layer in reversed(self.layers):
            z, ld = layer.inverse(z)
            log_det_J += ld
        return z, log_det_J

    def g(self, z):
        x = z
        for layer in self.layers:
            x, _ = layer(x)
        return x

    def log_prob(self, x):
        z, log_det_J = self.f(x)
        return self.prior.log_prob(z) + log_det_J

    def sample(self, batch_size):
        z = self.prior.sample((batch_size,))
        return self.g(z)


data = make_moons(512, noise=0.05)
flow = RealNVP()
optimizer = torch.optim.Adam([p for p in flow.parameters() if p.requires_grad], lr=1e-3)


def train_step(x):
    loss = -flow.log_prob(x).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


batch_size = 128
for epoch in range(10):
    perm = torch.randperm(data.shape[0])
    total = 0.0
    for i in range(0, data.shape[0], batch_size):
        total += train_step(data[perm[i : i + batch_size]]).item()
    print(f"epoch {epoch} loss: {total / (data.shape[0] // batch_size):.6f}")

flow.eval()
with torch.no_grad():
    z0 = flow.prior.sample((256,))
    samples = flow.g(z0)
    z1, _ = flow.f(samples)
    print("round trip ok:", torch.allclose(z0, z1, atol=1e-4))
    samples = flow.sample(256)
    print("sample mean", samples.mean(0).tolist(), "std", samples.std(0).tolist())
    print("sample nll", -flow.log_prob(samples).mean().item())
