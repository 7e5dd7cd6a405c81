# A conditional character-level RNN generating names in the manner of PyTorch's "NLP from
# scratch: generating names with a character-level RNN" tutorial: the category one-hot,
# the letter one-hot and the hidden state concatenated into i2h and i2o, their outputs
# into o2o, dropout and LogSoftmax, the NLLLoss summed over the letters of a name (each
# letter predicting the next, EOS last) with the update written by hand, and sampling by
# topk until EOS (written for this suite; a tiny built-in name list instead of the data
# download).
# compat: step=train loss="loss (\S+)"
import random
import string

import torch
import torch.nn as nn

category_lines = {
    "German": "bauer koch meyer kuhn braun vogel wolf lang hahn graf".split(),  # edit: size
    "Spanish": "abana diaz ruiz lopez ortiz perez gomez vidal soto cruz".split(),  # edit: size
    "Russian": "babin orlov popov titov sokol zotov lukin belov gusev ivin".split(),  # edit: size
}
all_categories = list(category_lines)
n_categories = len(all_categories)
all_letters = string.ascii_lowercase
n_letters = len(all_letters) + 1  # plus EOS


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(n_categories + input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(n_categories + input_size + hidden_size, output_size)
        self.o2o = nn.Linear(hidden_size + output_size, output_size)
        self.dropout = nn.Dropout(0.1)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, category, input, hidden):
        input_combined = torch.cat((category, input, hidden), 1)
        hidden = self.i2h(input_combined)
        output = self.i2o(input_combined)
        output_combined = torch.cat((hidden, output), 1)
        output = self.o2o(output_combined)
        output = self.dropout(output)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


def categoryTensor(category):
    tensor = torch.zeros(1, n_categories)
    tensor[0][all_categories.index(category)] = 1
    return tensor


def inputTensor(line):  # one-hot letters, first to last (not including EOS)
    tensor = torch.zeros(len(line), 1, n_letters)
    for li in range(len(line)):
        tensor[li][0][all_letters.find(line[li])] = 1
    return tensor


def targetTensor(line):  # letter indexes, second letter to the end, then EOS
    letter_indexes = [all_letters.find(line[li]) for li in range(1, len(line))]
    letter_indexes.append(n_letters - 1)
    return torch.LongTensor(letter_indexes)


def randomTrainingExample():
    category = random.choice(all_categories)
    line = random.choice(category_lines[category])
    return categoryTensor(category), inputTensor(line), targetTensor(line)


torch.manual_seed(0)
random.seed(0)
rnn = RNN(n_letters, 32, n_letters)
criterion = nn.NLLLoss()
learning_rate = 0.05


def train(category_tensor, input_line_tensor, target_line_tensor):
    target_line_tensor.unsqueeze_(-1)
    hidden = rnn.initHidden()
    rnn.zero_grad()
    loss = torch.Tensor([0])  # you can also just simply use ``loss = 0``
    for i in range(input_line_tensor.size(0)):
        output, hidden = rnn(category_tensor, input_line_tensor[i], hidden)
        loss += criterion(output, target_line_tensor[i])
    loss.backward()
    for p in rnn.parameters():
        p.data.add_(p.grad.data, alpha=-learning_rate)
    return output, loss / input_line_tensor.size(0)


n_iters, print_every, total_loss = 300, 50, 0.0
for iter in range(1, n_iters + 1):
    output, loss = train(*randomTrainingExample())
    total_loss += loss.item()
    if iter % print_every == 0:
        print(f"{iter} {iter / n_iters * 100:.0f}% loss {total_loss / print_every:.6f}")
        total_loss = 0.0

max_length = 10


def sample(category, start_letter="a"):
    with torch.no_grad():
        category_tensor = categoryTensor(category)
        input = inputTensor(start_letter)
        hidden = rnn.initHidden()
        output_name = start_letter
        for _ in range(max_length):
            output, hidden = rnn(category_tensor, input[0], hidden)
            topv, topi = output.topk(1)
            topi = topi[0][0]
            if topi == n_letters - 1:
                break
            output_name += all_letters[topi]
            input = inputTensor(all_letters[topi])
        return output_name


rnn.eval()
for category, start in (("German", "b"), ("Spanish", "g"), ("Russian", "p")):
    print(category, sample(category, start))
