# A VQ-VAE on synthetic images: a strided convolutional encoder with residual stacks, a
# vector quantiser (distances to a codebook by matmul, argmin, a one-hot by scatter_, the
# straight-through estimator, codebook and commitment losses, perplexity), a decoder of
# ConvTranspose2d, Adam; then the EMA quantiser (codebook moved by exponential moving
# averages of assignments, its Parameters replaced in the forward), eagerly, in the manner
# of zalandoresearch/pytorch-vq-vae's notebook (MIT; written for this suite, random images
# for CIFAR-10, sizes shrunk).
# compat: step=train_step loss="recon_error: (\S+)"
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class VectorQuantizer(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, commitment_cost, decay=0.0, epsilon=1e-5):
        super().__init__()
        self._dim, self._num = embedding_dim, num_embeddings
        self._embedding = nn.Embedding(num_embeddings, embedding_dim)
        self._commitment_cost, self._decay, self._epsilon = commitment_cost, decay, epsilon
        if decay > 0:
            self._embedding.weight.data.normal_()
            self.register_buffer("_ema_cluster_size", torch.zeros(num_embeddings))
            self._ema_w = nn.Parameter(torch.Tensor(num_embeddings, embedding_dim))
            self._ema_w.data.normal_()
        else:
            self._embedding.weight.data.uniform_(-1 / num_embeddings, 1 / num_embeddings)

    def forward(self, inputs):
        inputs = inputs.permute(0, 2, 3, 1).contiguous()
        flat = inputs.view(-1, self._dim)
        distances = (
            torch.sum(flat**2, dim=1, keepdim=True)
            + torch.sum(self._embedding.weight**2, dim=1)
            - 2 * torch.matmul(flat, self._embedding.weight.t())
        )
        indices = torch.argmin(distances, dim=1).unsqueeze(1)
        encodings = torch.zeros(indices.shape[0], self._num, device=inputs.device)
        encodings.scatter_(1, indices, 1)
        quantized = torch.matmul(encodings, self._embedding.weight).view(inputs.shape)
        if self._decay > 0 and self.training:
            self._ema_cluster_size = self._ema_cluster_size * self._decay + (
                1 - self._decay
            ) * torch.sum(encodings, 0)
            n = torch.sum(self._ema_cluster_size.data)
            self._ema_cluster_size = (
                (self._ema_cluster_size + self._epsilon) / (n + self._num * self._epsilon) * n
            )
            dw = torch.matmul(encodings.t(), flat)
            self._ema_w = nn.Parameter(self._ema_w * self._decay + (1 - self._decay) * dw)
            self._embedding.weight = nn.Parameter(self._ema_w / self._ema_cluster_size.unsqueeze(1))
        loss = self._commitment_cost * F.mse_loss(quantized.detach(), inputs)
        if self._decay == 0:
            loss = loss + F.mse_loss(quantized, inputs.detach())
        quantized = inputs + (quantized - inputs).detach()
        avg_probs = torch.mean(encodings, dim=0)
        perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
        return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity


class Residual(nn.Module):
    def __init__(self, ch, hidden):
        super().__init__()
        self._block = nn.Sequential(
            nn.ReLU(True),
            nn.Conv2d(ch, hidden, 3, 1, 1, bias=False),
            nn.ReLU(True),
            nn.Conv2d(hidden, ch, 1, bias=False),
        )

    def forward(self, x):
        return x + self._block(x)


def residual_stack(ch, hidden, layers):
    return nn.Sequential(*[Residual(ch, hidden) for _ in range(layers)], nn.ReLU())


class Model(nn.Module):
    def __init__(
        self, hiddens=16, res_layers=2, res_hiddens=8, num_embeddings=32, dim=8, decay=0.0
    ):
        super().__init__()
        self._encoder = nn.Sequential(
            nn.Conv2d(3, hiddens // 2, 4, 2, 1),
            nn.ReLU(),
            nn.Conv2d(hiddens // 2, hiddens, 4, 2, 1),
            nn.ReLU(),
            nn.Conv2d(hiddens, hiddens, 3, 1, 1),
            residual_stack(hiddens, res_hiddens, res_layers),
        )
        self._pre_vq_conv = nn.Conv2d(hiddens, dim, kernel_size=1, stride=1)
        self._vq_vae = VectorQuantizer(num_embeddings, dim, 0.25, decay)
        self._decoder = nn.Sequential(
            nn.Conv2d(dim, hiddens, 3, 1, 1),
            residual_stack(hiddens, res_hiddens, res_layers),
            nn.ConvTranspose2d(hiddens, hiddens // 2, 4, 2, 1),
            nn.ReLU(),
            nn.ConvTranspose2d(hiddens // 2, 3, 4, 2, 1),
        )

    def forward(self, x):
        loss, quantized, perplexity = self._vq_vae(self._pre_vq_conv(self._encoder(x)))
        return loss, self._decoder(quantized), perplexity


imgs = torch.rand(64, 3, 16, 16) - 0.5
imgs[:, 1] = imgs[:, 0] * 0.5
data_variance = float(np.var((imgs + 0.5).numpy()))


def step(model, optimizer, data):
    optimizer.zero_grad()
    vq_loss, data_recon, perplexity = model(data)
    recon_error = F.mse_loss(data_recon, data) / data_variance
    (recon_error + vq_loss).backward()
    optimizer.step()
    return recon_error, perplexity


def train(step_fn, model, steps):
    model.train()
    for i in range(steps):
        recon_error, perplexity = step_fn(imgs[(i * 16) % 64 : (i * 16) % 64 + 16])
        if (i + 1) % 4 == 0:
            print(
                f"{i + 1} iterations, recon_error: {recon_error.item():.6f} perplexity: {perplexity.item():.4f}"
            )
    model.eval()
    with torch.no_grad():
        _, recon, _ = model(imgs[:8])
    print("eval mse", F.mse_loss(recon, imgs[:8]).item())


ema = Model(decay=0.99)
ema_optimizer = torch.optim.Adam(ema.parameters(), lr=1e-3)
print("EMA quantiser (eagerly: its forward makes new Parameters)")
train(lambda data: step(ema, ema_optimizer, data), ema, 8)

model = Model()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, amsgrad=False)


def train_step(data):
    return step(model, optimizer, data)


print("quantiser")
train(train_step, model, 12)
