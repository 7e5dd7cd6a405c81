# A denoising diffusion model (DDPM) on 2-D points in the manner of tanelp/tiny-diffusion
# (MIT) after Ho et al.: a linear beta schedule with its cumulative products, q_sample
# adding noise at timesteps drawn with torch.randint, a noise-predicting MLP with
# sinusoidal timestep embeddings and residual blocks of GELU, MSE against the noise,
# AdamW with clip_grad_norm_, an exponential moving average of the weights by lerp_ under
# torch.no_grad, and ancestral sampling from pure noise with the EMA weights (written for
# this suite; a noisy circle of 512 points instead of the dinosaur data set, 50 timesteps).
# compat: step=train_step loss="loss (\S+)"
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class SinusoidalEmbedding(nn.Module):
    def __init__(self, size, scale=1.0):
        super().__init__()
        self.size, self.scale = size, scale

    def forward(self, x):
        x = x * self.scale
        half = self.size // 2
        emb = torch.exp(-math.log(10000.0) / (half - 1) * torch.arange(half))
        emb = x.unsqueeze(-1) * emb.unsqueeze(0)
        return torch.cat((torch.sin(emb), torch.cos(emb)), dim=-1)


class Block(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.ff = nn.Linear(size, size)
        self.act = nn.GELU()

    def forward(self, x):
        return x + self.act(self.ff(x))


class MLP(nn.Module):
    def __init__(self, hidden_size=64, hidden_layers=2, emb_size=32):
        super().__init__()
        self.time_mlp = SinusoidalEmbedding(emb_size)
        self.input_mlp1 = SinusoidalEmbedding(emb_size, scale=25.0)
        self.input_mlp2 = SinusoidalEmbedding(emb_size, scale=25.0)
        layers = [nn.Linear(3 * emb_size, hidden_size), nn.GELU()]
        layers += [Block(hidden_size) for _ in range(hidden_layers)]
        layers.append(nn.Linear(hidden_size, 2))
        self.joint_mlp = nn.Sequential(*layers)

    def forward(self, x, t):
        x = torch.cat(
            (self.input_mlp1(x[:, 0]), self.input_mlp2(x[:, 1]), self.time_mlp(t)), dim=-1
        )
        return self.joint_mlp(x)


class NoiseScheduler:
    def __init__(self, num_timesteps=50, beta_start=0.0001, beta_end=0.02):
        self.num_timesteps = num_timesteps
        self.betas = torch.linspace(beta_start, beta_end, num_timesteps, dtype=torch.float32)
        self.alphas = 1.0 - self.betas
        self.alphas_cumprod = torch.cumprod(self.alphas, dim=0)
        self.alphas_cumprod_prev = F.pad(self.alphas_cumprod[:-1], (1, 0), value=1.0)
        self.sqrt_alphas_cumprod = self.alphas_cumprod**0.5
        self.sqrt_one_minus_alphas_cumprod = (1 - self.alphas_cumprod) ** 0.5
        self.sqrt_inv_alphas_cumprod = torch.sqrt(1 / self.alphas_cumprod)
        self.sqrt_inv_alphas_cumprod_minus_one = torch.sqrt(1 / self.alphas_cumprod - 1)
        self.posterior_mean_coef1 = (
            self.betas * torch.sqrt(self.alphas_cumprod_prev) / (1.0 - self.alphas_cumprod)
        )
        self.posterior_mean_coef2 = (
            (1.0 - self.alphas_cumprod_prev) * torch.sqrt(self.alphas) / (1.0 - self.alphas_cumprod)
        )

    def reconstruct_x0(self, x_t, t, noise):
        s1 = self.sqrt_inv_alphas_cumprod[t].reshape(-1, 1)
        s2 = self.sqrt_inv_alphas_cumprod_minus_one[t].reshape(-1, 1)
        return s1 * x_t - s2 * noise

    def q_posterior(self, x_0, x_t, t):
        s1 = self.posterior_mean_coef1[t].reshape(-1, 1)
        s2 = self.posterior_mean_coef2[t].reshape(-1, 1)
        return s1 * x_0 + s2 * x_t

    def get_variance(self, t):
        if t == 0:
            return 0
        variance = (
            self.betas[t] * (1.0 - self.alphas_cumprod_prev[t]) / (1.0 - self.alphas_cumprod[t])
        )
        return variance.clip(1e-20)

    def step(self, model_output, timestep, sample):
        pred_original_sample = self.reconstruct_x0(sample, timestep, model_output)
        pred_prev_sample = self.q_posterior(pred_original_sample, sample, timestep)
        variance = 0
        if timestep > 0:
            noise = torch.randn_like(model_output)
            variance = (self.get_variance(timestep) ** 0.5) * noise
        return pred_prev_sample + variance

    def add_noise(self, x_start, x_noise, timesteps):
        s1 = self.sqrt_alphas_cumprod[timesteps].reshape(-1, 1)
        s2 = self.sqrt_one_minus_alphas_cumprod[timesteps].reshape(-1, 1)
        return s1 * x_start + s2 * x_noise


def circle_dataset(n):
    theta = torch.rand(n) * 2 * math.pi
    points = torch.stack([torch.cos(theta), torch.sin(theta)], 1)
    return points + 0.05 * torch.randn(n, 2)


torch.manual_seed(42)
dataset = circle_dataset(512)
model = MLP()
ema = copy.deepcopy(model)
noise_scheduler = NoiseScheduler(num_timesteps=50)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)


def train_step(batch, noise, timesteps):
    noisy = noise_scheduler.add_noise(batch, noise, timesteps)
    noise_pred = model(noisy, timesteps)
    loss = F.mse_loss(noise_pred, noise)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    with torch.no_grad():
        for p_ema, p in zip(ema.parameters(), model.parameters()):
            p_ema.lerp_(p, 0.1)
    return loss


for epoch in range(12):
    model.train()
    perm, total = torch.randperm(len(dataset)), 0.0
    for i in range(0, len(dataset), 64):
        batch = dataset[perm[i : i + 64]]
        noise = torch.randn(batch.shape)
        timesteps = torch.randint(0, noise_scheduler.num_timesteps, (batch.shape[0],)).long()
        total += train_step(batch, noise, timesteps).item()
    print(f"epoch {epoch} loss {total / 8:.6f}")

ema.eval()
sample = torch.randn(256, 2)
for t in reversed(range(noise_scheduler.num_timesteps)):
    with torch.no_grad():
        residual = ema(sample, torch.full((256,), t, dtype=torch.long))
    sample = noise_scheduler.step(residual, t, sample)
radius = sample.norm(dim=1)
print(f"samples: mean radius {radius.mean().item():.4f}, std {radius.std().item():.4f}")
