# A WGAN with gradient penalty on a 2-D mixture of eight Gaussians, in the manner of
# the "Improved Training of Wasserstein GANs" toy experiments (gan_toy.py of
# igul222/improved_wgan_training and its PyTorch port caogang/wgan-gp): ReLU MLPs for
# the generator and the critic, the penalty's interpolates made with torch.rand and
# expand, their gradients by autograd.grad(create_graph=True, retain_graph=True,
# only_inputs=True), ((norm(2, dim=1) - 1) ** 2).mean() * LAMBDA, backward with the
# one / mone tensors, five critic iterations per generator iteration, Adam with
# betas=(0.5, 0.9) (written for this suite; fewer iterations, smaller nets; the step
# compiled is the critic's).
# compat: step=critic_step loss="D_cost: (\S+)"
import math

import numpy as np
import torch
import torch.autograd as autograd
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(1)
np.random.seed(1)

DIM = 64  # model dimensionality
LAMBDA = 0.1  # gradient penalty lambda hyperparameter (0.1 in the toy experiments)
CRITIC_ITERS = 5  # how many critic iterations per generator iteration
BATCH_SIZE = 64
ITERS = 12  # how many generator iterations to train for


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        main = nn.Sequential(
            nn.Linear(2, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, 2),
        )
        self.main = main

    def forward(self, noise, real_data):
        output = self.main(noise)
        return output


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        main = nn.Sequential(
            nn.Linear(2, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, 1),
        )
        self.main = main

    def forward(self, inputs):
        output = self.main(inputs)
        return output.view(-1)


def inf_train_gen():
    """Eight Gaussians on a circle of radius 2, scaled by 1/1.414, std 0.02."""
    scale = 2.0
    centers = [
        (1, 0),
        (-1, 0),
        (0, 1),
        (0, -1),
        (1.0 / np.sqrt(2), 1.0 / np.sqrt(2)),
        (1.0 / np.sqrt(2), -1.0 / np.sqrt(2)),
        (-1.0 / np.sqrt(2), 1.0 / np.sqrt(2)),
        (-1.0 / np.sqrt(2), -1.0 / np.sqrt(2)),
    ]
    centers = [(scale * x, scale * y) for x, y in centers]
    while True:
        dataset = []
        for _i in range(BATCH_SIZE):
            point = np.random.randn(2) * 0.02
            center = centers[np.random.randint(len(centers))]
            point[0] += center[0]
            point[1] += center[1]
            dataset.append(point)
        dataset = np.array(dataset, dtype="float32")
        dataset /= 1.414  # stdev
        yield dataset


def calc_gradient_penalty(netD, real_data, fake_data):
    alpha = torch.rand(BATCH_SIZE, 1)
    alpha = alpha.expand(real_data.size())

    interpolates = alpha * real_data + ((1 - alpha) * fake_data)
    interpolates = interpolates.requires_grad_(True)

    disc_interpolates = netD(interpolates)

    gradients = autograd.grad(
        outputs=disc_interpolates,
        inputs=interpolates,
        grad_outputs=torch.ones(disc_interpolates.size()),
        create_graph=True,
        retain_graph=True,
        only_inputs=True,
    )[0]

    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * LAMBDA
    return gradient_penalty


netG = Generator()
netD = Discriminator()

optimizerD = optim.Adam(netD.parameters(), lr=5e-4, betas=(0.5, 0.9))
optimizerG = optim.Adam(netG.parameters(), lr=5e-4, betas=(0.5, 0.9))

one = torch.tensor(1, dtype=torch.float)
mone = one * -1


def critic_step(real_data, noise):
    netD.zero_grad()

    # train with real
    D_real = netD(real_data)
    D_real = D_real.mean()
    D_real.backward(mone)

    # train with fake
    with torch.no_grad():
        fake = netG(noise, real_data)  # totally freeze netG
    D_fake = netD(fake)
    D_fake = D_fake.mean()
    D_fake.backward(one)

    # train with gradient penalty
    gradient_penalty = calc_gradient_penalty(netD, real_data, fake)
    gradient_penalty.backward()

    D_cost = D_fake - D_real + gradient_penalty
    Wasserstein_D = D_real - D_fake
    optimizerD.step()
    return D_cost, Wasserstein_D


def generator_step(noise, real_data):
    netG.zero_grad()
    fake = netG(noise, real_data)
    G = netD(fake)
    G = G.mean()
    G.backward(mone)
    G_cost = -G
    optimizerG.step()
    return G_cost


data = inf_train_gen()
for iteration in range(ITERS):
    ############################
    # (1) Update D network
    ###########################
    for p in netD.parameters():  # reset requires_grad
        p.requires_grad = True  # they are set to False below in netG update

    for _iter_d in range(CRITIC_ITERS):
        _data = next(data)
        real_data = torch.Tensor(_data)
        noise = torch.randn(BATCH_SIZE, 2)
        D_cost, Wasserstein_D = critic_step(real_data, noise)

    ############################
    # (2) Update G network
    ###########################
    for p in netD.parameters():
        p.requires_grad = False  # to avoid computation

    _data = next(data)
    real_data = torch.Tensor(_data)
    noise = torch.randn(BATCH_SIZE, 2)
    G_cost = generator_step(noise, real_data)

    print(
        f"iter {iteration} D_cost: {D_cost.item():.6f} G_cost: {G_cost.item():.6f} "
        f"wasserstein: {Wasserstein_D.item():.6f}"
    )

with torch.no_grad():
    samples = netG(torch.randn(512, 2), None)
print(
    "samples mean",
    [round(v, 4) for v in samples.mean(0).tolist()],
    "std",
    [round(v, 4) for v in samples.std(0).tolist()],
    math.isfinite(samples.sum().item()),
)
