# A character-level language model in the makemore style: a lookup table C indexed by
# integer tensors, a tanh hidden layer, F.cross_entropy, hand-written SGD over a list of
# parameters and minibatches drawn with randint (written for this suite; a tiny built-in
# word list instead of a download).
# compat: step=step
import torch
import torch.nn.functional as F

words = (
    "emma olivia ava isabella sophia charlotte mia amelia harper evelyn abigail emily "
    "elizabeth mila ella avery sofia camila aria scarlett victoria madison luna grace "
    "chloe penelope layla riley zoey nora lily eleanor hannah lillian addison aubrey "
    "ellie stella natalie zoe leah hazel violet aurora savannah audrey brooklyn bella"
).split()
chars = sorted(set("".join(words)))
stoi = {s: i + 1 for i, s in enumerate(chars)}
stoi["."] = 0
block_size = 3


def build_dataset(words):
    X, Y = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + ".":
            ix = stoi[ch]
            X.append(context)
            Y.append(ix)
            context = context[1:] + [ix]
    return torch.tensor(X), torch.tensor(Y)


Xtr, Ytr = build_dataset(words)
g = torch.manual_seed(2147483647)
vocab = len(stoi)
C = torch.randn((vocab, 10))
W1 = torch.randn((30, 64)) * 0.2
b1 = torch.randn(64) * 0.01
W2 = torch.randn((64, vocab)) * 0.01
b2 = torch.zeros(vocab)
parameters = [C, W1, b1, W2, b2]
for p in parameters:
    p.requires_grad = True


def step(Xb, Yb, lr):
    emb = C[Xb]
    h = torch.tanh(emb.view(-1, 30) @ W1 + b1)
    logits = h @ W2 + b2
    loss = F.cross_entropy(logits, Yb)
    for p in parameters:
        p.grad = None
    loss.backward()
    for p in parameters:
        p.data += -lr * p.grad
    return loss


for i in range(400):
    ix = torch.randint(0, Xtr.shape[0], (32,))
    loss = step(Xtr[ix], Ytr[ix], 0.1 if i < 300 else 0.01)
    if i % 100 == 99:
        print(f"{i:5d} loss {loss.item():.4f}")

with torch.no_grad():
    emb = C[Xtr]
    h = torch.tanh(emb.view(-1, 30) @ W1 + b1)
    print(f"train loss {F.cross_entropy(h @ W2 + b2, Ytr).item():.4f}")
