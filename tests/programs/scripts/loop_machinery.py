# A classifier trained with the machinery of a modern training script, in the manner of
# timm's train.py and nanoGPT's train.py (written for this suite; synthetic Gaussian
# clusters instead of a data set): a TensorDataset and a shuffling DataLoader driven by a
# seeded torch.Generator (drop_last), AdamW with two parameter groups (no weight decay on
# biases and norm weights, chosen by ndim), OneCycleLR stepped once per optimizer step,
# gradient accumulation over 2 micro-batches, clip_grad_norm_, an EMA of the weights
# (swa_utils.AveragedModel with get_ema_multi_avg_fn), label smoothing, evaluation of the
# EMA model under inference_mode, and a checkpoint (model, EMA, optimizer, scheduler) saved
# with torch.save, loaded into fresh objects with torch.load and resumed.
# compat: step=train_step loss="loss: (\S+)"
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

NUM_CLASSES, DIM = 5, 16
BATCH_SIZE, ACCUM_STEPS = 32, 2
EPOCHS, RESUME_AT = 6, 3
MAX_LR, WEIGHT_DECAY, CLIP = 3e-3, 0.05, 1.0

centers = torch.randn(NUM_CLASSES, DIM) * 0.6
train_y = torch.randint(0, NUM_CLASSES, (600,))
train_x = centers[train_y] + torch.randn(600, DIM)
val_y = torch.randint(0, NUM_CLASSES, (200,))
val_x = centers[val_y] + torch.randn(200, DIM)

g = torch.Generator()
g.manual_seed(42)
train_loader = DataLoader(
    TensorDataset(train_x, train_y),
    batch_size=BATCH_SIZE * ACCUM_STEPS,
    shuffle=True,
    drop_last=True,
    generator=g,
)
val_loader = DataLoader(TensorDataset(val_x, val_y), batch_size=100)
steps_per_epoch = len(train_loader)


class Block(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.norm(x)))))


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(DIM, 32)
        self.blocks = nn.Sequential(Block(32, 64), Block(32, 64))
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, NUM_CLASSES)

    def forward(self, x):
        return self.head(self.norm(self.blocks(self.stem(x))))


def configure_optimizers(model):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or name.endswith(".bias") else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": WEIGHT_DECAY},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=MAX_LR, betas=(0.9, 0.95))


def build():
    model = Classifier()
    optimizer = configure_optimizers(model)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=MAX_LR, epochs=EPOCHS, steps_per_epoch=steps_per_epoch, pct_start=0.25
    )
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    return model, optimizer, scheduler, ema


model, optimizer, scheduler, ema_model = build()
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)


def train_step(inputs, targets):
    model.train()
    total = 0.0
    for micro_x, micro_y in zip(inputs.chunk(ACCUM_STEPS), targets.chunk(ACCUM_STEPS)):
        loss = criterion(model(micro_x), micro_y) / ACCUM_STEPS
        loss.backward()
        total = total + loss.detach()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    scheduler.step()
    ema_model.update_parameters(model)
    return total, grad_norm


def evaluate(net):
    net.eval()
    correct, loss_sum = 0, 0.0
    with torch.inference_mode():
        for x, y in val_loader:
            logits = net(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(dim=1) == y).sum().item()
    return loss_sum / len(val_loader.dataset), correct / len(val_loader.dataset)


def train_epochs(start, stop):
    for epoch in range(start, stop):
        running, max_norm = 0.0, 0.0
        for inputs, targets in train_loader:
            loss, grad_norm = train_step(inputs, targets)
            running += loss.item()
            max_norm = max(max_norm, grad_norm.item())
        val_loss, acc = evaluate(ema_model)
        lr = scheduler.get_last_lr()[0]
        print(
            f"epoch {epoch} lr {lr:.6f} train loss: {running / steps_per_epoch:.6f} "
            f"max grad norm {max_norm:.4f} ema val loss {val_loss:.6f} acc {acc:.3f}"
        )


train_epochs(0, RESUME_AT)

ckpt_path = os.path.join(tempfile.mkdtemp(), "last.pth")
torch.save(
    {
        "epoch": RESUME_AT,
        "model": model.state_dict(),
        "ema": ema_model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng_state": torch.get_rng_state(),
        "loader_rng_state": g.get_state(),
    },
    ckpt_path,
)

model, optimizer, scheduler, ema_model = build()
checkpoint = torch.load(ckpt_path, map_location="cpu")
model.load_state_dict(checkpoint["model"])
ema_model.load_state_dict(checkpoint["ema"])
optimizer.load_state_dict(checkpoint["optimizer"])
scheduler.load_state_dict(checkpoint["scheduler"])
torch.set_rng_state(checkpoint["rng_state"])
g.set_state(checkpoint["loader_rng_state"])
train_epochs(checkpoint["epoch"], EPOCHS)
val_loss, acc = evaluate(model)
print(f"final model val loss: {val_loss:.6f} acc {acc:.3f}")
