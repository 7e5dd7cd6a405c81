# A matrix-factorisation recommender with sparse embedding gradients: user and item tables
# (nn.Embedding(sparse=True)) under SparseAdam, item tags pooled by nn.EmbeddingBag(mode="sum",
# sparse=True) over offsets under SGD with momentum (as DLRM's tables), a dense MLP tower under
# Adam, BCEWithLogits with pos_weight, ReduceLROnPlateau on a held-out loss.
# compat: loss="loss (\S+)" why="no compiled pass: SparseAdam updates with sparse gradients, which only eager calls make"
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
U, I, D, TAGS = 50, 80, 8, 12


class Recommender(nn.Module):
    def __init__(self):
        super().__init__()
        self.user = nn.Embedding(U, D, sparse=True)
        self.item = nn.Embedding(I, D, sparse=True)
        self.user_bias = nn.Embedding(U, 1, sparse=True)
        self.tags = nn.EmbeddingBag(TAGS, D, mode="sum", sparse=True)
        self.tower = nn.Sequential(nn.Linear(2 * D, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, u, i):
        eu, ei = self.user(u), self.item(i) + self.item_tags(i)
        dot = (eu * ei).sum(-1)
        return dot + self.tower(torch.cat([eu, ei], -1)).squeeze(-1) + self.user_bias(u).squeeze(-1)

    def item_tags(self, i):
        counts = tag_count[i]
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)[:-1]])
        tags = torch.cat([item_tags[j][: int(c)] for j, c in zip(i.tolist(), counts.tolist())])
        return self.tags(tags, offsets)


tag_count = torch.randint(1, 4, (I,))
item_tags = torch.randint(0, TAGS, (I, 3))
true_u, true_i = torch.randn(U, 4), torch.randn(I, 4)
users = torch.randint(0, U, (2000,))
items = torch.randint(0, I, (2000,))
labels = ((true_u[users] * true_i[items]).sum(-1) > 1.0).float()
train, held = slice(0, 1600), slice(1600, 2000)

model = Recommender()
sparse = [model.user.weight, model.item.weight, model.user_bias.weight]
opt_sparse = torch.optim.SparseAdam(sparse, lr=0.01)
opt_tags = torch.optim.SGD(model.tags.parameters(), lr=0.05, momentum=0.9)
opt_dense = torch.optim.Adam(model.tower.parameters(), lr=0.01)
plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt_dense, factor=0.5, patience=1)
pos_weight = (1 - labels[train].mean()) / labels[train].mean()

for epoch in range(6):
    perm = torch.randperm(1600)
    for k in range(0, 1600, 200):
        idx = perm[k : k + 200]
        opt_sparse.zero_grad()
        opt_tags.zero_grad()
        opt_dense.zero_grad()
        logits = model(users[train][idx], items[train][idx])
        loss = F.binary_cross_entropy_with_logits(logits, labels[train][idx], pos_weight=pos_weight)
        loss.backward()
        opt_sparse.step()
        opt_tags.step()
        opt_dense.step()
    with torch.no_grad():
        val = F.binary_cross_entropy_with_logits(model(users[held], items[held]), labels[held])
    plateau.step(val)
    print(
        f"epoch {epoch} loss {loss.item():.6f} val {val.item():.6f} lr {opt_dense.param_groups[0]['lr']}"
    )
print(f"final loss {val.item():.6f}")
