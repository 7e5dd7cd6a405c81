# A small convolutional classifier fed by a DataLoader with two persistent workers, whose
# dataset augments each image at random (a flip drawn with torch.rand, a shift with
# NumPy's global generator, noise with torch.randn) and whose worker_init_fn seeds
# Python's random from get_worker_info() and sets an attribute on its copy of the
# dataset: the batches, and the numbers the main process draws between them, depend on
# every worker's seed and state (written for this suite; synthetic 10x10 images).
# compat: step=train_step loss="loss (\S+)"
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, get_worker_info


class Augmented(Dataset):
    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        x = self.images[i]
        if torch.rand(()) < 0.5:
            x = x.flip(-1)
        x = torch.roll(x, int(np.random.randint(-1, 2)), dims=-2)
        x = x + 0.05 * torch.randn(x.shape) + self.bias
        return x, self.labels[i]

    bias = 0.0


def seed_worker(worker_id):
    info = get_worker_info()
    random.seed(info.seed % 2**32)
    info.dataset.bias = 0.01 * worker_id


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 6, 3)
        self.fc = nn.Linear(6 * 4 * 4, 3)
        self.dropout = nn.Dropout(0.2)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.fc(self.dropout(torch.flatten(x, 1)))


torch.manual_seed(3)
np.random.seed(3)
images = torch.randn(96, 1, 10, 10)
labels = (images.mean((1, 2, 3)) > 0).long() + (images[:, 0, :5].mean((1, 2)) > 0).long()
loader = DataLoader(
    Augmented(images, labels),
    batch_size=16,
    shuffle=True,
    num_workers=2,
    persistent_workers=True,
    worker_init_fn=seed_worker,
)
model = Net()
model.eval()  # dropout off: compiled steps draw their masks from another stream
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)


def train_step(x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


for epoch in range(3):
    for x, y in loader:
        loss = train_step(x, y)
        noise = torch.rand(1)  # the main process's generator, between batches
    print(f"epoch {epoch} loss {loss.item():.6f} main draw {noise.item():.6f}")
