# A character-level RNN classifying names by language in the manner of PyTorch's "NLP
# from scratch" tutorial: names as one-hot letter tensors, an RNN cell made of two
# Linear layers over torch.cat of the letter and the hidden state, LogSoftmax + NLLLoss
# on the last step, the update written by hand with p.data.add_, and topk for the guess
# (written for this suite; a tiny built-in name list instead of the data download).
# compat: step=train loss="loss (\S+)"
import random
import string

import torch
import torch.nn as nn

category_lines = {
    "English": "abbott adams allen baker brown clark hughes jones smith walker".split(),
    "Italian": "abate bruno conti gallo costa greco marino ricci romano russo".split(),  # edit: size
    "Japanese": "ueda fujita honda endo kato kimura mori sato suzuki tanaka".split(),  # edit: size
    "Polish": "nowak wojcik mazur krol wrona sowa kubiak".split(),  # edit: size
}
all_categories = list(category_lines)
all_letters = string.ascii_lowercase
n_letters, n_categories = len(all_letters), len(all_categories)


def letterToIndex(letter):
    return all_letters.find(letter)


def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][letterToIndex(letter)] = 1
    return tensor


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(input_size + hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        hidden = torch.tanh(self.i2h(combined))
        output = self.softmax(self.i2o(combined))
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


torch.manual_seed(0)
random.seed(0)
rnn = RNN(n_letters, 32, n_categories)
criterion = nn.NLLLoss()
learning_rate = 0.05


def categoryFromOutput(output):
    top_n, top_i = output.topk(1)
    category_i = top_i[0].item()
    return all_categories[category_i], category_i


def randomTrainingExample():
    category = random.choice(all_categories)
    line = random.choice(category_lines[category])
    category_tensor = torch.tensor([all_categories.index(category)], dtype=torch.long)
    return category, line, category_tensor, lineToTensor(line)


def train(category_tensor, line_tensor):
    hidden = rnn.initHidden()
    rnn.zero_grad()
    for i in range(line_tensor.size()[0]):
        output, hidden = rnn(line_tensor[i], hidden)
    loss = criterion(output, category_tensor)
    loss.backward()
    for p in rnn.parameters():
        p.data.add_(p.grad.data, alpha=-learning_rate)
    return output, loss


n_iters, print_every = 300, 50
current_loss = 0.0
for iter in range(1, n_iters + 1):
    category, line, category_tensor, line_tensor = randomTrainingExample()
    output, loss = train(category_tensor, line_tensor)
    current_loss += loss.item()
    if iter % print_every == 0:
        guess, guess_i = categoryFromOutput(output)
        correct = "ok" if guess == category else f"wrong ({category})"
        print(f"{iter} {line} / {guess} {correct} | loss {current_loss / print_every:.6f}")
        current_loss = 0.0

with torch.no_grad():
    for name in ("kowalczyk", "satoshi", "rossi"):
        hidden = rnn.initHidden()
        line_tensor = lineToTensor(name)
        for i in range(line_tensor.size(0)):
            output, hidden = rnn(line_tensor[i], hidden)
        topv, topi = output.topk(2, 1, True)
        print(name, [(round(topv[0][i].item(), 2), all_categories[topi[0][i]]) for i in range(2)])
