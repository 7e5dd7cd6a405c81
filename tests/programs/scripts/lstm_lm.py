# A word-level LSTM language model in the manner of PyTorch's word_language_model
# example: an Embedding encoder, a two-layer nn.LSTM with dropout, a Linear decoder with
# tied weights, hidden states detached between batches, and clip_grad_norm_ (written for
# this suite; a short built-in corpus instead of a download).
# compat: step=train_step loss="loss (\S+)"
import torch
import torch.nn as nn

corpus = (
    "the cat sat on the mat . the dog sat on the log . a cat and a dog met on the mat . "
    "the dog saw the cat on the log and the cat saw the dog on the mat . "
) * 8
words = corpus.split()
vocab = {w: i for i, w in enumerate(sorted(set(words)))}
ids = torch.tensor([vocab[w] for w in words], dtype=torch.long)
bsz, bptt = 4, 4  # edit: size
nbatch = ids.size(0) // bsz
train_data = ids[: nbatch * bsz].view(bsz, -1).t().contiguous()


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        return self.decoder(output).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (
            weight.new_zeros(self.nlayers, bsz, self.nhid),
            weight.new_zeros(self.nlayers, bsz, self.nhid),
        )


torch.manual_seed(0)
model = RNNModel(len(vocab), 16, 16, 2)
model.eval()  # dropout off: compiled steps draw their masks from another stream
criterion = nn.NLLLoss()
lr = 2.0


def train_step(data, targets, h, c):
    model.zero_grad()
    output, (h, c) = model(data, (h, c))
    loss = criterion(torch.log_softmax(output, dim=-1), targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    return loss, h.detach(), c.detach()


for epoch in range(3):
    h, c = model.init_hidden(bsz)
    for i in range(0, train_data.size(0) - 1 - bptt, bptt):
        data, targets = train_data[i : i + bptt], train_data[i + 1 : i + 1 + bptt].reshape(-1)
        loss, h, c = train_step(data, targets, h, c)
    print(f"| epoch {epoch} | loss {loss.item():.4f}")
