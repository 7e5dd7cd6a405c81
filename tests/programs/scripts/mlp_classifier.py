# A two-layer classifier on synthetic blobs with a DataLoader, CrossEntropyLoss, Adam,
# train()/eval() and an accuracy under no_grad: the shape of most tutorial training loops
# (written for this suite).
# compat: step=train_step loss="loss (\S+)"
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
n, classes = 512, 3
centers = torch.randn(classes, 2) * 3
labels = torch.randint(0, classes, (n,))
points = centers[labels] + torch.randn(n, 2)
train = TensorDataset(points[:384], labels[:384])
test = TensorDataset(points[384:], labels[384:])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 32)
        self.fc2 = nn.Linear(32, classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


model = Net()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)


def train_step(xb, yb):
    optimizer.zero_grad()
    loss = criterion(model(xb), yb)
    loss.backward()
    optimizer.step()
    return loss


for epoch in range(5):
    model.train()
    total = 0.0
    for xb, yb in DataLoader(train, batch_size=64, shuffle=True):
        total += train_step(xb, yb).item()
    model.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in DataLoader(test, batch_size=128):
            correct += (model(xb).argmax(dim=1) == yb).sum().item()
    print(f"epoch {epoch} loss {total / 6:.5f} accuracy {correct / len(test):.3f}")
