# A two-layer graph convolutional network (Kipf and Welling) on a random citation graph:
# bag-of-words features normalised row by row, a sparse symmetric-normalised adjacency
# with self-loops built from sparse_coo_tensor, to_sparse and diag, GraphConv layers of
# mm then spmm, dropout, log_softmax + nll_loss on a training mask, Adam with weight
# decay, in the manner of PyTorch's GCN example (written for this suite; a synthetic
# graph instead of the Cora download).
# compat: step=train_step loss="loss_train: (\S+)"
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(0)
N_NODES, N_WORDS, N_CLASSES, N_EDGES = 120, 40, 4, 300


def make_graph():
    """Features, labels and the normalised adjacency D^-1/2 (A + I) D^-1/2 of a graph
    whose edges mostly join nodes of one class."""
    labels = rng.integers(0, N_CLASSES, N_NODES)
    words = (
        rng.random((N_NODES, N_WORDS))
        < 0.1 + 0.2 * (labels[:, None] == np.arange(N_WORDS) % N_CLASSES)
    ).astype(np.float32)
    words[:, 0] = 1.0  # no empty row
    features = torch.from_numpy(words)
    features = torch.diag(1 / features.sum(1)).to_sparse().mm(features)
    by_class = [np.flatnonzero(labels == c) for c in range(N_CLASSES)]
    src = rng.integers(0, N_NODES, N_EDGES)
    dst = np.array(
        [
            rng.choice(by_class[labels[s]]) if rng.random() < 0.8 else rng.integers(N_NODES)
            for s in src
        ]
    )
    edges = np.unique(np.concatenate([np.stack([src, dst]), np.stack([dst, src])], 1), axis=1)
    edges = edges[:, edges[0] != edges[1]]
    adj = torch.sparse_coo_tensor(
        torch.from_numpy(edges), torch.ones(edges.shape[1]), (N_NODES, N_NODES)
    )
    adj = torch.eye(N_NODES) + adj
    d = torch.diag(adj.sum(1) ** -0.5).to_sparse()
    adj = (torch.sparse.mm(d, adj) @ d.to_dense()).to_sparse()
    return features, torch.from_numpy(labels), adj


class GraphConv(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))
        nn.init.xavier_normal_(self.weight)

    def forward(self, x, adj):
        return torch.spmm(adj, torch.mm(x, self.weight)) + self.bias


class GCN(nn.Module):
    def __init__(self, n_in, n_hidden, n_out, p):
        super().__init__()
        self.conv1, self.conv2 = GraphConv(n_in, n_hidden), GraphConv(n_hidden, n_out)
        self.dropout = nn.Dropout(p)

    def forward(self, x, adj):
        x = self.dropout(F.relu(self.conv1(self.dropout(x), adj)))
        return F.log_softmax(self.conv2(x, adj), dim=1)


features, labels, adj = make_graph()
train, val = torch.arange(0, 60), torch.arange(60, 90)
model = GCN(N_WORDS, 16, N_CLASSES, 0.5)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)


def train_step(labels, train):
    model.train()
    optimizer.zero_grad()
    out = model(features, adj)
    loss = F.nll_loss(out[train], labels[train])
    loss.backward()
    optimizer.step()
    return loss, out


for epoch in range(40):
    loss, out = train_step(labels, train)
    if epoch % 10 == 9 or epoch == 39:
        model.eval()
        with torch.no_grad():
            val_out = model(features, adj)
            val_loss = F.nll_loss(val_out[val], labels[val])
            acc = (val_out[val].argmax(1) == labels[val]).float().mean()
        print(
            f"epoch {epoch + 1} loss_train: {loss.item():.6f} loss_val: {val_loss.item():.6f} acc_val: {acc.item():.3f}"
        )
