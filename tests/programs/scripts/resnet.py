# A small ResNet in the manner of torchvision's resnet.py (BSD-3-Clause): BasicBlock with
# two conv3x3 + BatchNorm2d and the residual added before the last ReLU, a 1x1 conv +
# BatchNorm downsample where the stride or width changes, _make_layer, kaiming_normal_
# (mode="fan_out") for the convolutions, the last BatchNorm of each block zero-initialised,
# AdaptiveAvgPool2d and torch.flatten before the classifier; trained with SGD (momentum,
# nesterov, weight decay) under a MultiStepLR schedule and CrossEntropyLoss with label
# smoothing, evaluated in eval mode on BatchNorm's running statistics (written for this
# suite; 16x16 synthetic images of four classes, coloured squares on noise, widths 8x smaller).
# compat: step=train_step loss="lr \S+ loss (\S+)"
import torch
import torch.nn as nn
import torch.nn.functional as F


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=4, zero_init_residual=True):
        super().__init__()
        self.inplanes = 8
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(block, 8, layers[0])
        self.layer2 = self._make_layer(block, 16, layers[1], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16 * block.expansion, num_classes)  # edit: size
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))  # edit: size
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def make_data(n):
    """Four classes: a square of the class's colour at a random place, on noise."""
    colours = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, -1.0]])
    labels = torch.randint(0, 4, (n,))
    images = torch.randn(n, 3, 16, 16) * 0.5
    corners = torch.randint(0, 12, (n, 2))
    for i, (c, (r, col)) in enumerate(zip(labels.tolist(), corners.tolist())):
        images[i, :, r : r + 4, col : col + 4] += colours[c].view(3, 1, 1)
    return images, labels


torch.manual_seed(0)
train_x, train_y = make_data(128)
test_x, test_y = make_data(64)
model = ResNet(BasicBlock, [1, 1])  # edit: size
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
optimizer = torch.optim.SGD(
    model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4
)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[5, 7], gamma=0.1)


def train_step(images, target):
    output = model(images)
    loss = criterion(output, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss, output


for epoch in range(8):
    model.train()
    perm = torch.randperm(len(train_y))
    total, correct = 0.0, 0
    for i in range(0, len(train_y), 32):
        idx = perm[i : i + 32]
        loss, output = train_step(train_x[idx], train_y[idx])
        total += loss.item()
        correct += (output.argmax(1) == train_y[idx]).sum().item()
    scheduler.step()
    model.eval()
    with torch.no_grad():
        test_out = model(test_x)
        test_loss = F.cross_entropy(test_out, test_y).item()
        acc = (test_out.argmax(1) == test_y).float().mean().item()
    print(
        f"epoch {epoch} lr {scheduler.get_last_lr()[0]:.4f} loss {total / 4:.6f} train acc {correct / 128:.3f} test loss {test_loss:.6f} acc {acc:.3f}"
    )
