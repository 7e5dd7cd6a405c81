# SimCLR-style contrastive learning (Chen et al.) on synthetic vectors in the manner of
# sthalles/SimCLR and the common PyTorch re-implementations: two random views of each
# sample (Gaussian noise, random feature masking with torch.rand, random scaling), an MLP
# encoder with BatchNorm plus a projection head, the NT-Xent loss (F.normalize, the
# similarity matrix, the diagonal masked out with torch.eye(dtype=torch.bool) and
# masked_fill / boolean indexing, a temperature, F.cross_entropy against labels made with
# torch.arange and cat), plain Adam instead of LARS, and a linear probe on the frozen
# encoder at the end (written for this suite; clusters of 32-d vectors instead of images).
# compat: step=train_step loss="loss: (\S+)"
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N, DIM, N_CLASSES, BATCH = 256, 32, 4, 64
TEMPERATURE = 0.2


def make_data():
    centers = torch.randn(N_CLASSES, DIM) * 2.0
    labels = torch.randint(0, N_CLASSES, (N,))
    x = centers[labels] + 1.5 * torch.randn(N, DIM)
    return x, labels


class Augment:
    """Two random views: additive noise, masking a random tenth of the features, scaling."""

    def __init__(self, noise=0.1, drop=0.1, scale=(0.8, 1.2)):
        self.noise, self.drop, self.scale = noise, drop, scale

    def __call__(self, x):
        x = x + self.noise * torch.randn_like(x)
        keep = (torch.rand(x.shape) > self.drop).float()
        x = x * keep
        lo, hi = self.scale
        s = torch.empty(x.size(0), 1).uniform_(lo, hi)
        return x * s


class SimCLR(nn.Module):
    def __init__(self, in_dim, hidden=64, feat_dim=32, out_dim=16):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(in_dim, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, feat_dim),
        )
        self.projector = nn.Sequential(
            nn.Linear(feat_dim, feat_dim), nn.ReLU(), nn.Linear(feat_dim, out_dim)
        )

    def forward(self, x):
        h = self.encoder(x)
        return h, self.projector(h)


def info_nce_loss(features, batch_size, temperature):
    labels = torch.cat([torch.arange(batch_size) for i in range(2)], dim=0)
    labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()

    features = F.normalize(features, dim=1)
    similarity_matrix = torch.matmul(features, features.T)

    # discard the main diagonal from both: labels and similarities matrix
    mask = torch.eye(labels.shape[0], dtype=torch.bool)
    labels = labels[~mask].view(labels.shape[0], -1)
    similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)

    # select and combine multiple positives
    positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)
    # select only the negatives
    negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)

    logits = torch.cat([positives, negatives], dim=1)
    labels = torch.zeros(logits.shape[0], dtype=torch.long)
    logits = logits / temperature
    return logits, labels


def nt_xent(z1, z2, temperature):
    """The same loss written the other common way: masked_fill of the diagonal, and each
    row's positive at index i + B (or i - B)."""
    b = z1.size(0)
    z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
    sim = z @ z.t() / temperature
    sim = sim.masked_fill(torch.eye(2 * b, dtype=torch.bool), float("-inf"))
    targets = torch.cat([torch.arange(b, 2 * b), torch.arange(0, b)])
    return F.cross_entropy(sim, targets)


x_all, y_all = make_data()
augment = Augment()
model = SimCLR(DIM)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-6)
criterion = nn.CrossEntropyLoss()


def train_step(x1, x2):
    model.train()
    optimizer.zero_grad()
    _, z1 = model(x1)
    _, z2 = model(x2)
    logits, labels = info_nce_loss(torch.cat([z1, z2], dim=0), x1.size(0), TEMPERATURE)
    loss = criterion(logits, labels)
    loss2 = nt_xent(z1, z2, TEMPERATURE)
    loss.backward()
    optimizer.step()
    top1 = (logits.argmax(1) == labels).float().mean()
    return loss, loss2, top1


for epoch in range(6):
    perm = torch.randperm(N)
    for i in range(0, N, BATCH):
        xb = x_all[perm[i : i + BATCH]]
        loss, loss2, top1 = train_step(augment(xb), augment(xb))
    print(
        f"epoch {epoch + 1} loss: {loss.item():.6f} nt_xent {loss2.item():.6f} top1 {top1.item():.3f}"
    )

# linear evaluation: a logistic-regression probe on frozen encoder features
model.eval()
with torch.no_grad():
    feats, _ = model(x_all)
probe = nn.Linear(feats.size(1), N_CLASSES)
probe_opt = torch.optim.Adam(probe.parameters(), lr=1e-2)
for _it in range(50):
    probe_opt.zero_grad()
    probe_loss = F.cross_entropy(probe(feats[:192]), y_all[:192])
    probe_loss.backward()
    probe_opt.step()
with torch.no_grad():
    acc = (probe(feats[192:]).argmax(1) == y_all[192:]).float().mean()
print(f"probe loss {probe_loss.item():.6f} test accuracy {acc.item():.3f}")
