# A mixture density network on Bishop's inverse-sine problem, in the manner of the MDN
# tutorials (hardmaru's "Mixture Density Networks with PyTorch", sagelywizard/pytorch-mdn):
# y = x + 0.3 sin(2 pi x) + noise inverted, so that each input has several outputs; a tanh
# MLP with three heads (mixture logits, means, log standard deviations), the negative
# log-likelihood from torch.distributions.MixtureSameFamily(Categorical(logits),
# Normal(mu, sigma)).log_prob (the distributions reached as attributes of the torch
# module after a plain `import torch`), checked against the hand-written logsumexp of
# log_softmax and the Gaussian log-density, Adam with a StepLR schedule, and samples drawn
# from the predicted mixture at the end (written for this suite; synthetic data from
# torch's RNG).
# compat: step=train_step loss="loss: (\S+)"
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(42)

N_SAMPLES, N_GAUSSIANS, N_HIDDEN = 1000, 5, 32

# the forward problem y = f(x) is one-to-one; its inverse is the one we learn
y_data = torch.rand(N_SAMPLES, 1)
x_data = y_data + 0.3 * torch.sin(2 * math.pi * y_data) + 0.1 * torch.randn(N_SAMPLES, 1)


class MDN(nn.Module):
    def __init__(self, n_hidden, n_gaussians):
        super().__init__()
        self.z_h = nn.Sequential(
            nn.Linear(1, n_hidden), nn.Tanh(), nn.Linear(n_hidden, n_hidden), nn.Tanh()
        )
        self.z_pi = nn.Linear(n_hidden, n_gaussians)
        self.z_mu = nn.Linear(n_hidden, n_gaussians)
        self.z_sigma = nn.Linear(n_hidden, n_gaussians)

    def forward(self, x):
        z_h = self.z_h(x)
        logits = self.z_pi(z_h)
        mu = self.z_mu(z_h)
        log_sigma = self.z_sigma(z_h).clamp(-7.0, 7.0)
        return logits, mu, log_sigma

    def mixture(self, x):
        logits, mu, log_sigma = self(x)
        mix = torch.distributions.Categorical(logits=logits)
        comp = torch.distributions.Normal(mu, log_sigma.exp())
        return torch.distributions.MixtureSameFamily(mix, comp)


def mdn_loss_manual(logits, mu, log_sigma, y):
    log_pi = F.log_softmax(logits, dim=-1)
    log_normal = -0.5 * ((y - mu) / log_sigma.exp()) ** 2 - log_sigma - 0.5 * math.log(2 * math.pi)
    return -torch.logsumexp(log_pi + log_normal, dim=-1).mean()


model = MDN(N_HIDDEN, N_GAUSSIANS)
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)


def train_step(x, y):
    logits, mu, log_sigma = model(x)
    mix = torch.distributions.Categorical(logits=logits)
    comp = torch.distributions.Normal(mu, log_sigma.exp())
    gmm = torch.distributions.MixtureSameFamily(mix, comp)
    loss = -gmm.log_prob(y.squeeze(-1)).mean()
    manual = mdn_loss_manual(logits, mu, log_sigma, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss, manual


batch_size = 200
for epoch in range(8):
    perm = torch.randperm(N_SAMPLES)
    total, worst = 0.0, 0.0
    for i in range(0, N_SAMPLES, batch_size):
        idx = perm[i : i + batch_size]
        loss, manual = train_step(x_data[idx], y_data[idx])
        assert torch.allclose(loss, manual, rtol=1e-5, atol=1e-5), (loss.item(), manual.item())
        worst = max(worst, (loss - manual).abs().item())
        total += loss.item()
    scheduler.step()
    print(
        f"epoch {epoch} lr {scheduler.get_last_lr()[0]:.5f} loss: {total / (N_SAMPLES // batch_size):.6f}"
    )

model.eval()
with torch.no_grad():
    x_test = torch.linspace(-0.1, 1.1, 50).unsqueeze(1)
    dist = model.mixture(x_test)
    samples = dist.sample((10,))
    print("samples", tuple(samples.shape), "mean", samples.mean().item())
    print("mixture mean", dist.mean.mean().item(), "variance", dist.variance.mean().item())
    print("test nll", -dist.log_prob(x_test.squeeze(-1) * 0 + 0.5).mean().item())
