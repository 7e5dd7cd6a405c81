# A classifier trained by a small Lightning-free "Trainer" in the manner of the plain-PyTorch
# trainer scripts (a Trainer class with fit / train_epoch / validate, a history of logged
# metrics) and PyTorch's "Introduction to torch.compile" tutorial: the whole training step
# is compiled with `@torch.compile` and returns its logging numbers as Python floats
# (`loss.item()`, the batch accuracy, and the total norm returned by clip_grad_norm_), the
# running loss is accumulated outside the step weighted by `x.size(0)`, and the DataLoader
# keeps its last partial batch (no drop_last); an MLP with BatchNorm1d, AdamW and a
# per-epoch StepLR (written for this suite; synthetic Gaussian blobs instead of a data set).
# compat: loss="val loss: (\S+)" why="it compiles itself (torch.compile): staged's run is compiled"
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

N_FEATURES, N_CLASSES, HIDDEN = 20, 4, 64
N_TRAIN, N_VAL, BATCH_SIZE, EPOCHS, MAX_NORM = 500, 200, 64, 3, 1.0


def make_blobs(n):
    centers = torch.randn(N_CLASSES, N_FEATURES, generator=torch.Generator().manual_seed(123))
    y = torch.randint(0, N_CLASSES, (n,))
    x = centers[y] + 1.5 * torch.randn(n, N_FEATURES)
    return x, y


model = nn.Sequential(
    nn.Linear(N_FEATURES, HIDDEN, bias=False),  # no bias before BatchNorm: it cancels it
    nn.BatchNorm1d(HIDDEN),
    nn.ReLU(),
    nn.Linear(HIDDEN, HIDDEN, bias=False),
    nn.BatchNorm1d(HIDDEN),
    nn.ReLU(),
    nn.Linear(HIDDEN, N_CLASSES),
)
criterion = nn.CrossEntropyLoss()


@torch.compile
def train_step(model, optimizer, x, y):
    optimizer.zero_grad(set_to_none=True)
    logits = model(x)
    loss = criterion(logits, y)
    loss.backward()
    total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
    optimizer.step()
    pred = logits.argmax(dim=1)
    return {
        "loss": loss.item(),
        "acc": (pred == y).float().mean().item(),
        "grad_norm": total_norm.item(),
    }


class Trainer:
    def __init__(self, model, optimizer, scheduler, train_loader, val_loader, max_epochs):
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.train_loader, self.val_loader = train_loader, val_loader
        self.max_epochs = max_epochs
        self.history = []

    def train_epoch(self, epoch):
        self.model.train()
        running_loss, running_correct, seen, max_norm = 0.0, 0.0, 0, 0.0
        for x, y in self.train_loader:
            out = train_step(self.model, self.optimizer, x, y)
            running_loss += out["loss"] * x.size(0)
            running_correct += out["acc"] * x.size(0)
            seen += x.size(0)
            max_norm = max(max_norm, out["grad_norm"])
        return {
            "train_loss": running_loss / seen,
            "train_acc": running_correct / seen,
            "max_grad_norm": max_norm,
        }

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        total_loss, correct, seen = 0.0, 0, 0
        for x, y in self.val_loader:
            logits = self.model(x)
            total_loss += criterion(logits, y).item() * x.size(0)
            correct += (logits.argmax(1) == y).sum().item()
            seen += x.size(0)
        return {"val_loss": total_loss / seen, "val_acc": correct / seen}

    def fit(self):
        for epoch in range(self.max_epochs):
            t0 = time.perf_counter()
            metrics = {"epoch": epoch, "lr": self.scheduler.get_last_lr()[0]}
            metrics.update(self.train_epoch(epoch))
            metrics.update(self.validate())
            self.scheduler.step()
            self.history.append(metrics)
            print(
                f"epoch {epoch} lr {metrics['lr']:.4f} train loss: {metrics['train_loss']:.6f} "
                f"acc {metrics['train_acc']:.4f} max grad norm {metrics['max_grad_norm']:.4f} "
                f"val loss: {metrics['val_loss']:.6f} val acc {metrics['val_acc']:.4f} "
                f"({time.perf_counter() - t0:.1f}s)"
            )
        return self.history


x_train, y_train = make_blobs(N_TRAIN)
x_val, y_val = make_blobs(N_VAL)
train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH_SIZE, shuffle=True)
val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=100)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
history = Trainer(model, optimizer, scheduler, train_loader, val_loader, EPOCHS).fit()
best = min(history, key=lambda m: m["val_loss"])
print(
    f"best epoch {best['epoch']} train loss: {best['train_loss']:.6f} val loss: {best['val_loss']:.6f}"
)
