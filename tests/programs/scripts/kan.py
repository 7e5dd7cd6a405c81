# A Kolmogorov-Arnold network: each edge a SiLU base plus a cubic B-spline on a grid of
# knots, the bases built by the Cox-de Boor recursion from comparisons, spline weights
# fitted to noise by a batched torch.linalg.lstsq at initialisation and refitted when the
# grid adapts to the data (sort, linspace of int64 indices, concatenate), an L1 and
# entropy regulariser, AdamW and ExponentialLR, in the manner of Blealtan/efficient-kan
# (MIT; written for this suite, a synthetic classification instead of MNIST).
# compat: step=train_step loss="loss (\S+)"
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class KANLinear(nn.Module):
    def __init__(self, n_in, n_out, grid_size=5, order=3, noise=0.1, grid_eps=0.02, lo=-1, hi=1):
        super().__init__()
        self.n_in, self.n_out, self.grid_size, self.order = n_in, n_out, grid_size, order
        self.grid_eps = grid_eps
        h = (hi - lo) / grid_size
        knots = torch.arange(-order, grid_size + order + 1) * h + lo
        self.register_buffer("grid", knots.expand(n_in, -1).contiguous())
        self.base_weight = nn.Parameter(torch.empty(n_out, n_in))
        self.spline_weight = nn.Parameter(torch.empty(n_out, n_in, grid_size + order))
        self.spline_scaler = nn.Parameter(torch.empty(n_out, n_in))
        nn.init.kaiming_uniform_(self.base_weight, a=math.sqrt(5))
        with torch.no_grad():
            y = (torch.rand(grid_size + 1, n_in, n_out) - 0.5) * noise / grid_size
            self.spline_weight.copy_(self.fit(self.grid.T[order:-order], y))
        nn.init.kaiming_uniform_(self.spline_scaler, a=math.sqrt(5))

    def bases(self, x):
        """B-spline bases of x (batch, n_in): (batch, n_in, grid_size + order)."""
        g = self.grid
        x = x.unsqueeze(-1)
        b = ((x >= g[:, :-1]) & (x < g[:, 1:])).to(x.dtype)
        for k in range(1, self.order + 1):
            left = (x - g[:, : -(k + 1)]) / (g[:, k:-1] - g[:, : -(k + 1)]) * b[:, :, :-1]
            right = (g[:, k + 1 :] - x) / (g[:, k + 1 :] - g[:, 1:-k]) * b[:, :, 1:]
            b = left + right
        return b.contiguous()

    def fit(self, x, y):
        """Spline coefficients (n_out, n_in, coeffs) whose curves pass nearest y at x."""
        A = self.bases(x).transpose(0, 1)
        sol = torch.linalg.lstsq(A, y.transpose(0, 1)).solution
        return sol.permute(2, 0, 1).contiguous()

    @property
    def scaled_spline_weight(self):
        return self.spline_weight * self.spline_scaler.unsqueeze(-1)

    def forward(self, x):
        base = F.linear(F.silu(x), self.base_weight)
        spline = F.linear(
            self.bases(x).view(x.size(0), -1), self.scaled_spline_weight.view(self.n_out, -1)
        )
        return base + spline

    @torch.no_grad()
    def update_grid(self, x, margin=0.01):
        """Move the knots to the data's quantiles (mixed with a uniform grid), refitting
        the splines so the layer's outputs on x stay as they were."""
        batch = x.size(0)
        out = torch.bmm(self.bases(x).permute(1, 0, 2), self.scaled_spline_weight.permute(1, 2, 0))
        xs = torch.sort(x, dim=0)[0]
        adaptive = xs[torch.linspace(0, batch - 1, self.grid_size + 1, dtype=torch.int64)]
        step = (xs[-1] - xs[0] + 2 * margin) / self.grid_size
        uniform = (
            torch.arange(self.grid_size + 1, dtype=torch.float32).unsqueeze(1) * step
            + xs[0]
            - margin
        )
        g = self.grid_eps * uniform + (1 - self.grid_eps) * adaptive
        below = g[:1] - step * torch.arange(self.order, 0, -1).unsqueeze(1)
        above = g[-1:] + step * torch.arange(1, self.order + 1).unsqueeze(1)
        self.grid.copy_(torch.concatenate([below, g, above], dim=0).T)
        self.spline_weight.data.copy_(self.fit(x, out.permute(1, 0, 2)))

    def regularization_loss(self):
        l1 = self.spline_weight.abs().mean(-1)
        total = l1.sum()
        p = l1 / total
        return total - torch.sum(p * p.log())


class KAN(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.layers = nn.ModuleList(KANLinear(a, b) for a, b in zip(widths, widths[1:]))

    def forward(self, x, update_grid=False):
        for layer in self.layers:
            if update_grid:
                layer.update_grid(x)
            x = layer(x)
        return x

    def regularization_loss(self):
        return sum(layer.regularization_loss() for layer in self.layers)


X = torch.randn(256, 32)
Y = (X[:, :10] * 2 + X[:, 10:20].sin()).argmax(1)
model = KAN([32, 16, 10])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.8)
criterion = nn.CrossEntropyLoss()


def train_step(x, y):
    optimizer.zero_grad()
    out = model(x)
    loss = criterion(out, y) + 1e-3 * model.regularization_loss()
    loss.backward()
    optimizer.step()
    return loss


for epoch in range(4):
    if epoch == 1:
        with torch.no_grad():
            model(X, update_grid=True)
    for i in range(0, 256, 64):
        loss = train_step(X[i : i + 64], Y[i : i + 64])
    scheduler.step()
    with torch.no_grad():
        acc = (model(X).argmax(1) == Y).float().mean()
    print(
        f"epoch {epoch} loss {loss.item():.6f} acc {acc.item():.4f} lr {optimizer.param_groups[0]['lr']:.5f}"
    )
