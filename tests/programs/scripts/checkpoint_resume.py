# Train, checkpoint model and optimizer with torch.save, load them into fresh objects with
# torch.load and go on training: the resume pattern of most training scripts (written for
# this suite).
# compat: step=train_step
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)
x = torch.randn(256, 8)
y = x @ torch.randn(8, 1) + 0.1 * torch.randn(256, 1)


def make():
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    return model, torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)


model, optimizer = make()
loss_fn = nn.MSELoss()


def train_step(xb, yb):
    optimizer.zero_grad()
    loss = loss_fn(model(xb), yb)
    loss.backward()
    optimizer.step()
    return loss


for epoch in range(3):
    for i in range(0, 256, 32):
        loss = train_step(x[i : i + 32], y[i : i + 32])
    print(f"epoch {epoch} loss {loss.item():.6f}")

path = os.path.join(tempfile.mkdtemp(), "checkpoint.pt")
torch.save({"epoch": 3, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
model, optimizer = make()
checkpoint = torch.load(path, weights_only=True)
model.load_state_dict(checkpoint["model"])
optimizer.load_state_dict(checkpoint["optimizer"])
for epoch in range(checkpoint["epoch"], 6):
    for i in range(0, 256, 32):
        loss = train_step(x[i : i + 32], y[i : i + 32])
    print(f"epoch {epoch} loss {loss.item():.6f}")
