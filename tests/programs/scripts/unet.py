# A U-Net segmenting synthetic images, in float64: double convolutions with BatchNorm,
# max-pool downs, bilinear Upsample(align_corners=True) ups padded to the skip's size and
# concatenated, cross-entropy plus a multiclass Dice loss over one_hot masks, channels_last
# inputs, RMSprop (foreach, momentum) with gradient clipping, a disabled GradScaler and
# autocast, ReduceLROnPlateau on an inference_mode Dice score, in the manner of
# milesial/Pytorch-UNet (GPL-3.0; written for this suite, its widths 8x smaller, images
# made by bicubic upsampling of noise and masks by an area-mode downsampling). In float32
# torch itself ends 5e-4 apart on one thread and two (RMSprop's first steps are sign-like).
# compat: step=train_step loss="loss (\S+)"
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
torch.manual_seed(0)


class DoubleConv(nn.Module):
    def __init__(self, cin, cout, mid=None):
        super().__init__()
        mid = mid or cout
        self.double_conv = nn.Sequential(
            nn.Conv2d(cin, mid, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(nn.MaxPool2d(2), DoubleConv(cin, cout))


class Up(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = DoubleConv(cin, cout, cin // 2)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        dy, dx = x2.size()[2] - x1.size()[2], x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([x2, x1], dim=1))


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, w=8):
        super().__init__()
        self.n_classes = n_classes
        self.inc = DoubleConv(n_channels, w)
        self.downs = nn.ModuleList(
            [Down(w, 2 * w), Down(2 * w, 4 * w), Down(4 * w, 4 * w)]  # edit: size
        )
        self.ups = nn.ModuleList([Up(8 * w, 2 * w), Up(4 * w, w), Up(2 * w, w)])  # edit: size
        self.outc = nn.Conv2d(w, n_classes, kernel_size=1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(skips[-1]))
        x = skips.pop()
        for up in self.ups:
            x = up(x, skips.pop())
        return self.outc(x)


def dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    sum_dim = (-1, -2) if input.dim() == 2 or not reduce_batch_first else (-1, -2, -3)
    inter = 2 * (input * target).sum(dim=sum_dim)
    sets_sum = input.sum(dim=sum_dim) + target.sum(dim=sum_dim)
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)
    return ((inter + epsilon) / (sets_sum + epsilon)).mean()


def dice_loss(input, target):
    return 1 - dice_coeff(input.flatten(0, 1), target.flatten(0, 1), reduce_batch_first=True)


@torch.inference_mode()
def evaluate(net, images, masks):
    net.eval()
    pred = F.one_hot(net(images).argmax(dim=1), net.n_classes).permute(0, 3, 1, 2).float()
    true = F.one_hot(masks, net.n_classes).permute(0, 3, 1, 2).float()
    score = dice_coeff(pred[:, 1:].flatten(0, 1), true[:, 1:].flatten(0, 1))
    net.train()
    return score


images = F.interpolate(torch.rand(8, 3, 9, 9), size=(37, 37), mode="bicubic", align_corners=False)
fine = (images[:, 0] > 0.5).double() + (images[:, 1] > 0.6).double()
masks = F.interpolate(fine.unsqueeze(1), size=(32, 32), mode="area").squeeze(1).round().long()
images = images[:, :, 2:34, 3:35].contiguous(memory_format=torch.channels_last)
model = UNet(n_channels=3, n_classes=3).to(memory_format=torch.channels_last)
optimizer = torch.optim.RMSprop(
    model.parameters(), lr=1e-4, weight_decay=1e-8, momentum=0.999, foreach=True
)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, "max", patience=1)
grad_scaler = torch.amp.GradScaler("cuda", enabled=False)
criterion = nn.CrossEntropyLoss()


def train_step(x, y):
    with torch.autocast("cpu", enabled=False):
        pred = model(x)
        loss = criterion(pred, y)
        loss += dice_loss(
            F.softmax(pred, dim=1).float(),
            F.one_hot(y, model.n_classes).permute(0, 3, 1, 2).float(),
        )
    optimizer.zero_grad(set_to_none=True)
    grad_scaler.scale(loss).backward()
    grad_scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    grad_scaler.step(optimizer)
    grad_scaler.update()
    return loss


model.train()
for epoch in range(3):
    for i in range(0, 6, 2):
        loss = train_step(images[i : i + 2], masks[i : i + 2])
    score = evaluate(model, images[6:], masks[6:])
    scheduler.step(score)
    print(
        f"epoch {epoch} loss {loss.item():.10f} dice {score.item():.6f} lr {optimizer.param_groups[0]['lr']}"
    )
