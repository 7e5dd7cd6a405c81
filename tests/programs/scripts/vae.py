# A variational autoencoder (linear encoder to mean and log-variance, the
# reparameterisation trick with randn_like, a sigmoid decoder, binary cross-entropy plus
# the KL term) in the manner of PyTorch's VAE example (written for this suite; synthetic
# binary images instead of MNIST).
# compat: step=train_step loss="loss: (\S+)"
import torch
from torch import nn, optim
from torch.nn import functional as F

torch.manual_seed(1)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc21 = nn.Linear(32, 4)
        self.fc22 = nn.Linear(32, 4)
        self.fc3 = nn.Linear(4, 32)
        self.fc4 = nn.Linear(32, 64)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 64))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


prototypes = (torch.rand(4, 64) > 0.5).float()
data = prototypes[torch.randint(0, 4, (512,))]
data = torch.where(torch.rand(512, 64) < 0.05, 1 - data, data)
model = VAE()
optimizer = optim.Adam(model.parameters(), lr=1e-2)


def train_step(batch):
    optimizer.zero_grad()
    recon_batch, mu, logvar = model(batch)
    loss = loss_function(recon_batch, batch, mu, logvar)
    loss.backward()
    optimizer.step()
    return loss


for epoch in range(1, 4):
    model.train()
    train_loss = 0.0
    for i in range(0, 512, 64):
        train_loss += train_step(data[i : i + 64]).item()
    print(f"====> Epoch: {epoch} Average loss: {train_loss / 512:.4f}")
