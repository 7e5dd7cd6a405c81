# Sub-pixel super-resolution in the manner of PyTorch's super_resolution example
# (BSD-3-Clause): four Conv2d layers ending in upscale_factor**2 channels that
# nn.PixelShuffle rearranges into the larger image, init.orthogonal_ with
# calculate_gain("relu"), MSELoss, Adam, and the test set's PSNR from 10 * log10(1 / mse)
# (written for this suite; smooth synthetic 24x24 images, their low-resolution inputs by
# F.avg_pool2d, instead of BSDS300 through torchvision, its widths 4x smaller).
# compat: step=train_step loss="Loss: (\S+)"
import math

import torch
import torch.nn as nn
import torch.nn.init as init
import torch.optim as optim

UPSCALE, SIZE = 3, 24


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 16, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(16, 16, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(16, 8, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(8, upscale_factor**2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


def images(n):
    """Sums of a few random sinusoids in [0, 1]: smooth enough for a 3x upscale to learn."""
    ys, xs = torch.meshgrid(torch.linspace(0, 1, SIZE), torch.linspace(0, 1, SIZE), indexing="ij")
    freq, phase = torch.rand(n, 3, 2) * 6, torch.rand(n, 3) * 2 * math.pi
    waves = torch.sin(
        freq[..., 0, None, None] * xs + freq[..., 1, None, None] * ys + phase[..., None, None]
    )
    return (waves.mean(1, keepdim=True) + 1) / 2


torch.manual_seed(123)
train_hr, test_hr = images(64), images(16)
train_lr, test_lr = (
    nn.functional.avg_pool2d(train_hr, UPSCALE),
    nn.functional.avg_pool2d(test_hr, UPSCALE),
)
model = Net(upscale_factor=UPSCALE)
criterion = nn.MSELoss()
optimizer = optim.Adam(model.parameters(), lr=0.01)


def train_step(input, target):
    optimizer.zero_grad()
    loss = criterion(model(input), target)
    loss.backward()
    optimizer.step()
    return loss


def train(epoch):
    epoch_loss = 0
    for iteration in range(0, len(train_hr), 16):
        loss = train_step(
            train_lr[iteration : iteration + 16], train_hr[iteration : iteration + 16]
        )
        epoch_loss += loss.item()
    print(f"===> Epoch {epoch} Complete: Avg. Loss: {epoch_loss / 4:.6f}")


def test():
    with torch.no_grad():
        mse = criterion(model(test_lr), test_hr)
        psnr = 10 * math.log10(1 / mse.item())
    print(f"===> Avg. PSNR: {psnr:.4f} dB")


for epoch in range(1, 16):
    train(epoch)
    if epoch % 5 == 0:
        test()
