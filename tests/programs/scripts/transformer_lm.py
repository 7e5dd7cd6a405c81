# A word-level language model on nn.TransformerEncoder in the manner of PyTorch's
# word_language_model example (BSD-3-Clause) and its TransformerModel: sinusoidal
# PositionalEncoding held in a buffer, the embedding scaled by sqrt(ninp), the causal mask
# as the log of tril(ones) (0 and -inf), TransformerEncoderLayer with dropout, log_softmax and
# NLLLoss, the corpus batchified into columns and cut into bptt chunks, the update
# written by hand after clip_grad_norm_, and the learning rate annealed by 4 when the
# validation loss stops falling (written for this suite; a tiny built-in corpus instead of
# Wikitext-2, its sizes smaller).
# compat: step=train_step loss="\| loss (\S+)"
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TEXT = (
    "the cat sat on the mat . the dog sat on the log . a cat saw a dog . "
    "the dog saw the cat on the mat . a bird sat on the dog . the bird saw a cat . "
) * 6


class Dictionary:
    def __init__(self):
        self.word2idx, self.idx2word = {}, []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]


def tokenize(dictionary, text):
    return torch.tensor(
        [dictionary.add_word(w) for w in text.split() + ["<eos>"]], dtype=torch.int64
    )


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[: x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Module):
    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(
            encoder_layers, nlayers, enable_nested_tensor=False
        )
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.init_weights()

    def _generate_square_subsequent_mask(self, sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src, has_mask=True):
        if has_mask:
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                self.src_mask = self._generate_square_subsequent_mask(len(src))
        else:
            self.src_mask = None
        src = self.encoder(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


torch.manual_seed(1111)
corpus = Dictionary()
train_data = batchify(tokenize(corpus, TEXT), 4)
val_data = batchify(tokenize(corpus, TEXT[: len(TEXT) // 3]), 2)
ntokens, bptt, clip = len(corpus.idx2word), 12, 0.25
model = TransformerModel(ntokens, 32, 2, 64, 1, 0.2)  # edit: size
criterion = nn.NLLLoss()
lr = 2.0


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].reshape(-1)


def train_step(data, targets, lr):
    model.zero_grad()
    output = model(data)
    loss = criterion(output.view(-1, ntokens), targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    return loss


def evaluate(source):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, bptt):
            data, targets = get_batch(source, i)
            total += len(data) * criterion(model(data).view(-1, ntokens), targets).item()
    return total / (len(source) - 1)


best_val_loss = None
for epoch in range(1, 5):
    model.train()
    total_loss = 0.0
    batches = range(0, train_data.size(0) - 1 - bptt, bptt)
    for i in batches:
        data, targets = get_batch(train_data, i)
        total_loss += train_step(data, targets, lr).item()
    val_loss = evaluate(val_data)
    print(
        f"| epoch {epoch} | lr {lr:.2f} | loss {total_loss / len(batches):.6f} | valid loss {val_loss:.6f} | valid ppl {math.exp(val_loss):.3f}"
    )
    if not best_val_loss or val_loss < best_val_loss:
        best_val_loss = val_loss
    else:
        lr /= 4.0
