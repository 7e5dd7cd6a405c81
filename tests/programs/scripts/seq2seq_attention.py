# A sequence-to-sequence GRU with Bahdanau attention in the manner of PyTorch's "NLP from
# scratch: translation with a sequence to sequence network and attention" tutorial: an
# Embedding + GRU encoder (batch_first, dropout), a decoder attending over the encoder's
# outputs (additive attention: Wa, Ua, Va, tanh, softmax, bmm) fed its targets (teacher
# forcing) for MAX_LENGTH steps, log_softmax + NLLLoss, Adam, a TensorDataset behind a
# DataLoader with a RandomSampler, and greedy decoding with topk (written for this suite;
# a synthetic "translation", each sentence reversed into another vocabulary, instead of
# the English-French download).
# compat: step=train_batch loss="loss (\S+)"
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

SOS_token, EOS_token = 0, 1
MAX_LENGTH = 3  # edit: size
N_WORDS = 12  # words 2 .. 11 in each language


def make_pairs(n, rng):
    pairs = []
    for _ in range(n):
        length = int(rng.integers(2, MAX_LENGTH))
        src = rng.integers(2, N_WORDS, size=length)
        pairs.append((src, (N_WORDS + 1 - src)[::-1]))  # reversed, word w -> N_WORDS + 1 - w
    return pairs


def get_dataloader(batch_size, rng):
    pairs = make_pairs(96, rng)
    input_ids = np.zeros((len(pairs), MAX_LENGTH), dtype=np.int32)
    target_ids = np.zeros((len(pairs), MAX_LENGTH), dtype=np.int32)
    for idx, (inp, tgt) in enumerate(pairs):
        input_ids[idx, : len(inp) + 1] = list(inp) + [EOS_token]
        target_ids[idx, : len(tgt) + 1] = list(tgt) + [EOS_token]
    train_data = TensorDataset(torch.LongTensor(input_ids), torch.LongTensor(target_ids))
    train_sampler = RandomSampler(train_data)
    return DataLoader(train_data, sampler=train_sampler, batch_size=batch_size, drop_last=True)


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size, dropout_p=0.1):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input):
        embedded = self.dropout(self.embedding(input))
        output, hidden = self.gru(embedded)
        return output, hidden


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, encoder_outputs, encoder_hidden, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS_token)
        decoder_hidden = encoder_hidden
        decoder_outputs, attentions = [], []
        for i in range(MAX_LENGTH):
            decoder_output, decoder_hidden, attn_weights = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs
            )
            decoder_outputs.append(decoder_output)
            attentions.append(attn_weights)
            if target_tensor is not None:
                decoder_input = target_tensor[:, i].unsqueeze(1)  # teacher forcing
            else:
                _, topi = decoder_output.topk(1)
                decoder_input = topi.squeeze(-1).detach()
        decoder_outputs = F.log_softmax(torch.cat(decoder_outputs, dim=1), dim=-1)
        return decoder_outputs, decoder_hidden, torch.cat(attentions, dim=1)

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        return self.out(output), hidden, attn_weights


torch.manual_seed(0)
rng = np.random.default_rng(0)
hidden_size, batch_size = 16, 16
train_dataloader = get_dataloader(batch_size, rng)
encoder = EncoderRNN(N_WORDS, hidden_size)
decoder = AttnDecoderRNN(hidden_size, N_WORDS)
encoder_optimizer = optim.Adam(encoder.parameters(), lr=0.01)
decoder_optimizer = optim.Adam(decoder.parameters(), lr=0.01)
criterion = nn.NLLLoss()


def train_batch(input_tensor, target_tensor):
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    encoder_outputs, encoder_hidden = encoder(input_tensor)
    decoder_outputs, _, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)
    loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), target_tensor.view(-1))
    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    return loss


for epoch in range(1, 9):
    total_loss = 0.0
    for input_tensor, target_tensor in train_dataloader:
        total_loss += train_batch(input_tensor, target_tensor).item()
    print(f"epoch {epoch} loss {total_loss / len(train_dataloader):.6f}")

encoder.eval()
decoder.eval()
with torch.no_grad():
    src = torch.LongTensor([[2, 3, EOS_token]])  # edit: size
    encoder_outputs, encoder_hidden = encoder(src)
    decoder_outputs, _, attentions = decoder(encoder_outputs, encoder_hidden)
    _, topi = decoder_outputs.topk(1)
    print("decoded", topi.squeeze().tolist(), "attention", attentions.shape)
