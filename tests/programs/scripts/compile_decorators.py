# An MLP classifier trained the PyTorch 2 way, with torch.compile used as its users do:
# `@torch.compile` on a loss function and on a whole `train_step(model, opt, x, y)`
# (PyTorch's "Introduction to torch.compile" tutorial), then `model = torch.compile(model)`
# and training through the returned module, saving its state_dict (keys prefixed
# `_orig_mod.`), loading it back into a fresh compiled module and stripping the prefix for a
# plain one (nanoGPT's train.py), and evaluating under `model.eval()` + `torch.no_grad()`.
# compat: loss="final loss: (\S+)" why="it compiles itself (torch.compile): staged's run is compiled"
import io

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

D_IN, HIDDEN, N_CLASSES, BATCH = 20, 64, 5, 32
DROPOUT = 0.0  # for pretraining 0 is good, for finetuning try 0.1+ (nanoGPT)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D_IN, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)
        self.drop = nn.Dropout(DROPOUT)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.head = nn.Linear(HIDDEN, N_CLASSES)

    def forward(self, x):
        x = F.gelu(self.norm(self.fc1(x)))
        x = self.drop(x)
        x = F.relu(self.fc2(x)) + x
        return self.head(x)


# a fixed synthetic task: labels from a random linear teacher
teacher = torch.randn(D_IN, N_CLASSES)
X = torch.randn(512, D_IN)
Y = (X @ teacher + 0.1 * torch.randn(512, N_CLASSES)).argmax(1)
X_val = torch.randn(128, D_IN)
Y_val = (X_val @ teacher).argmax(1)


def batches(epoch):
    g = torch.Generator().manual_seed(epoch)
    perm = torch.randperm(len(X), generator=g)
    for i in range(0, len(X), BATCH):
        idx = perm[i : i + BATCH]
        yield X[idx], Y[idx]


@torch.compile
def loss_fn(logits, target):
    # label-smoothed cross entropy plus a small logit penalty (z-loss)
    ce = F.cross_entropy(logits, target, label_smoothing=0.05)
    z = torch.logsumexp(logits, dim=-1)
    return ce + 1e-3 * (z**2).mean()


@torch.compile
def train_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    return loss


def evaluate(model):
    model.eval()
    with torch.no_grad():
        logits = model(X_val)
        loss = F.cross_entropy(logits, Y_val)
        acc = (logits.argmax(1) == Y_val).float().mean()
    model.train()
    return loss.item(), acc.item()


# phase 1: a plain model, the compiled loss function
model = MLP()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for x, y in batches(0):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
print(f"phase 1 loss: {loss.item():.6f}")

# phase 2: the whole step compiled
for x, y in batches(1):
    loss = train_step(model, opt, x, y)
print(f"phase 2 loss: {loss.item():.6f}")

# phase 3: torch.compile(model), trained through the returned module
cmodel = torch.compile(model)
opt = torch.optim.AdamW(cmodel.parameters(), lr=3e-3, weight_decay=0.01)
for epoch in (2, 3):
    for x, y in batches(epoch):
        logits = cmodel(x)
        loss = loss_fn(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    val_loss, val_acc = evaluate(cmodel)
    print(f"epoch {epoch} loss: {loss.item():.6f} val loss {val_loss:.6f} acc {val_acc:.4f}")

# checkpoint the compiled module as nanoGPT does: its keys carry the `_orig_mod.` prefix
state = cmodel.state_dict()
print("keys:", list(state)[:2])
buf = io.BytesIO()
torch.save({"model": state, "optimizer": opt.state_dict()}, buf)
buf.seek(0)
ckpt = torch.load(buf)

# resume into a fresh compiled module (the same keys) ...
resumed = torch.compile(MLP())
resumed.load_state_dict(ckpt["model"])
opt2 = torch.optim.AdamW(resumed.parameters(), lr=3e-3, weight_decay=0.01)
opt2.load_state_dict(ckpt["optimizer"])

# ... and into a plain one, the prefix stripped (nanoGPT's `unwanted_prefix`)
plain = MLP()
unwanted_prefix = "_orig_mod."
sd = {
    k[len(unwanted_prefix) :] if k.startswith(unwanted_prefix) else k: v
    for k, v in ckpt["model"].items()
}
plain.load_state_dict(sd)
print(f"resumed val loss: {evaluate(resumed)[0]:.6f} plain val loss: {evaluate(plain)[0]:.6f}")

for x, y in batches(4):
    loss = train_step(resumed, opt2, x, y)
print(f"phase 4 loss: {loss.item():.6f}")
val_loss, val_acc = evaluate(resumed)
print(f"final loss: {val_loss:.6f} acc {val_acc:.4f}")
