# A deep convolutional GAN in the manner of PyTorch's dcgan example: a generator of
# ConvTranspose2d + BatchNorm2d + ReLU ending in Tanh, a discriminator of Conv2d +
# BatchNorm2d + LeakyReLU ending in Sigmoid, weights_init through Module.apply on the
# class names, BCELoss against real/fake labels filled with full/fill_, the
# discriminator's loss on real and detached fake batches, the generator's on fake ones,
# two Adam optimizers with betas (written for this suite; tiny 16x16 synthetic images
# instead of a torchvision data set).
# compat: step=train_step loss="Loss_D: (\S+)"
import torch
import torch.nn as nn
import torch.optim as optim

nz, ngf, ndf, nc = 8, 8, 8, 1


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),  # 4x4
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),  # 8x8
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),  # 16x16
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),  # 8x8
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),  # 4x4
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def make_images(n, generator):
    """Blurry diagonal stripes: sin of x + y at random phases, in [-1, 1]."""
    grid = torch.arange(16.0)
    phase = torch.rand(n, 1, 1, 1, generator=generator) * 6.28
    return torch.sin((grid.view(1, 1, 16, 1) + grid.view(1, 1, 1, 16)) * 0.5 + phase)


torch.manual_seed(0)
data_gen = torch.Generator().manual_seed(1)
netG, netD = Generator(), Discriminator()
netG.apply(weights_init)
netD.apply(weights_init)
criterion = nn.BCELoss()
fixed_noise = torch.randn(4, nz, 1, 1)
real_label, fake_label = 1.0, 0.0
optimizerD = optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))
batch_size = 16


def train_step(real_cpu, noise):
    # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
    netD.zero_grad()
    label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype)
    output = netD(real_cpu)
    errD_real = criterion(output, label)
    errD_real.backward()
    D_x = output.mean()
    fake = netG(noise)
    label.fill_(fake_label)
    output = netD(fake.detach())
    errD_fake = criterion(output, label)
    errD_fake.backward()
    D_G_z1 = output.mean()
    errD = errD_real + errD_fake
    optimizerD.step()
    # (2) Update G network: maximize log(D(G(z)))
    netG.zero_grad()
    label.fill_(real_label)
    output = netD(fake)
    errG = criterion(output, label)
    errG.backward()
    D_G_z2 = output.mean()
    optimizerG.step()
    return errD, errG, D_x, D_G_z1, D_G_z2


for epoch in range(2):
    for i in range(8):
        real_cpu = make_images(batch_size, data_gen)
        noise = torch.randn(batch_size, nz, 1, 1)
        errD, errG, D_x, D_G_z1, D_G_z2 = train_step(real_cpu, noise)
        print(
            f"[{epoch}/2][{i}/8] Loss_D: {errD.item():.6f} Loss_G: {errG.item():.6f} "
            f"D(x): {D_x.item():.4f} D(G(z)): {D_G_z1.item():.4f} / {D_G_z2.item():.4f}"
        )
with torch.no_grad():
    fake = netG(fixed_noise)
print("fake images", tuple(fake.shape), f"mean {fake.mean().item():.4f}")
