# A small convolutional network (Conv2d, max pooling, dropout, log_softmax + nll_loss),
# trained with SGD and a StepLR schedule on synthetic 12x12 images: the shape of the
# classic MNIST example (written for this suite; synthetic data instead of a download).
# compat: step=train_step loss="loss (\S+)"
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(16 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


torch.manual_seed(1)
images = torch.randn(256, 1, 12, 12)
targets = (images[:, 0, :6].mean((1, 2)) > 0).long() * 2 + (
    images[:, 0, :, :6].mean((1, 2)) > 0
).long()
model = Net()
model.eval()  # dropout off: compiled steps draw their masks from another stream
optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = StepLR(optimizer, step_size=1, gamma=0.7)


def train_step(data, target):
    optimizer.zero_grad()
    output = model(data)
    loss = F.nll_loss(output, target)
    loss.backward()
    optimizer.step()
    return loss


for epoch in range(1, 4):
    for i in range(0, 256, 32):
        loss = train_step(images[i : i + 32], targets[i : i + 32])
    scheduler.step()
    print(f"Train Epoch: {epoch} loss {loss.item():.6f} lr {scheduler.get_last_lr()[0]:.4f}")
