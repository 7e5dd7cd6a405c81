# A one-layer Mamba (selective state-space) language model on a synthetic token stream:
# a depthwise causal Conv1d, softplus step sizes, a zero-order-hold discretisation by
# exp of einsum, the sequential selective scan over a Python loop, RMSNorm by rsqrt,
# tied embedding and head, AdamW and gradient clipping, then greedy generation, in the
# manner of johnma2006/mamba-minimal's model.py (Apache-2.0; written for this suite).
# compat: step=train_step loss="loss (\S+)"
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


@dataclass
class ModelArgs:
    d_model: int = 32
    n_layer: int = 1  # edit: size
    vocab_size: int = 29
    d_state: int = 8
    expand: int = 2
    d_conv: int = 4
    pad_vocab_size_multiple: int = 8

    def __post_init__(self):
        self.d_inner = self.expand * self.d_model
        self.dt_rank = math.ceil(self.d_model / 16)
        if self.vocab_size % self.pad_vocab_size_multiple:
            self.vocab_size += (
                self.pad_vocab_size_multiple - self.vocab_size % self.pad_vocab_size_multiple
            )


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class MambaBlock(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.in_proj = nn.Linear(args.d_model, args.d_inner * 2, bias=False)
        self.conv1d = nn.Conv1d(
            args.d_inner,
            args.d_inner,
            kernel_size=args.d_conv,
            groups=args.d_inner,
            padding=args.d_conv - 1,
        )
        self.x_proj = nn.Linear(args.d_inner, args.dt_rank + args.d_state * 2, bias=False)
        self.dt_proj = nn.Linear(args.dt_rank, args.d_inner, bias=True)
        A = torch.arange(1, args.d_state + 1).repeat(args.d_inner, 1)
        self.A_log = nn.Parameter(torch.log(A))
        self.D = nn.Parameter(torch.ones(args.d_inner))
        self.out_proj = nn.Linear(args.d_inner, args.d_model, bias=False)

    def forward(self, x):
        (b, l, d) = x.shape
        (x, res) = self.in_proj(x).split(split_size=[self.args.d_inner, self.args.d_inner], dim=-1)
        x = self.conv1d(x.transpose(1, 2))[:, :, :l].transpose(1, 2)
        x = F.silu(x)
        y = self.ssm(x) * F.silu(res)
        return self.out_proj(y)

    def ssm(self, x):
        (d_in, n) = self.A_log.shape
        A = -torch.exp(self.A_log.float())
        D = self.D.float()
        (delta, B, C) = self.x_proj(x).split(split_size=[self.args.dt_rank, n, n], dim=-1)
        delta = F.softplus(self.dt_proj(delta))
        return self.selective_scan(x, delta, A, B, C, D)

    def selective_scan(self, u, delta, A, B, C, D):
        (b, l, d_in) = u.shape
        n = A.shape[1]
        deltaA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
        deltaB_u = torch.einsum("bld,bln,bld->bldn", delta, B, u)
        x = torch.zeros((b, d_in, n), device=deltaA.device)
        ys = []
        for i in range(l):
            x = deltaA[:, i] * x + deltaB_u[:, i]
            ys.append(torch.einsum("bdn,bn->bd", x, C[:, i, :]))
        return torch.stack(ys, dim=1) + u * D


class ResidualBlock(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.mixer = MambaBlock(args)
        self.norm = RMSNorm(args.d_model)

    def forward(self, x):
        return self.mixer(self.norm(x)) + x


class Mamba(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.embedding = nn.Embedding(args.vocab_size, args.d_model)
        self.layers = nn.ModuleList([ResidualBlock(args) for _ in range(args.n_layer)])
        self.norm_f = RMSNorm(args.d_model)
        self.lm_head = nn.Linear(args.d_model, args.vocab_size, bias=False)
        self.lm_head.weight = self.embedding.weight

    def forward(self, input_ids):
        x = self.embedding(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm_f(x))


args = ModelArgs()
model = Mamba(args)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
# a stream with structure: each token is the sum of the two before it, mod 29
stream = [1, 2]
for _ in range(2000):
    stream.append((stream[-1] + stream[-2]) % 29)
data = torch.tensor(stream)
SEQ, BATCH = 8, 8  # edit: size


def get_batch():
    ix = torch.randint(len(data) - SEQ - 1, (BATCH,))
    x = torch.stack([data[i : i + SEQ] for i in ix])
    y = torch.stack([data[i + 1 : i + SEQ + 1] for i in ix])
    return x, y


def train_step(x, y):
    logits = model(x)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


for step in range(40):
    x, y = get_batch()
    loss = train_step(x, y)
    if step % 10 == 9:
        print(f"step {step} loss {loss.item():.6f}")

model.eval()
with torch.no_grad():
    ids = torch.tensor([[3, 5]])
    for _ in range(10):
        nxt = model(ids)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
print("generated", ids[0].tolist())
