# Sine-wave sequence prediction with two nn.LSTMCell layers unrolled by hand and LBFGS,
# in the manner of PyTorch's time_sequence_prediction example (BSD-3-Clause): the
# network's states zero-initialised in double precision, the outputs stacked, future
# steps predicted by feeding each output back, MSELoss, and optimizer.step(closure) with
# the closure's loss returned (written for this suite; 10 waves of 15 steps instead of
# the example's generated 100 x 1000 file, three LBFGS steps).
# compat: step=closure loss="STEP: \d+ loss: (\S+)"
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 24)
        self.lstm2 = nn.LSTMCell(24, 24)
        self.linear = nn.Linear(24, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 24, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 24, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 24, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 24, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


np.random.seed(2)
T, L, N = 20, 15, 10  # edit: size
x = np.empty((N, L), "int64")
x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
data = np.sin(x / 1.0 / T).astype("float64")

torch.manual_seed(0)
input = torch.from_numpy(data[3:, :-1])
target = torch.from_numpy(data[3:, 1:])
test_input = torch.from_numpy(data[:3, :-1])
test_target = torch.from_numpy(data[:3, 1:])
seq = Sequence().double()
criterion = nn.MSELoss()
optimizer = optim.LBFGS(seq.parameters(), lr=0.8)


def closure():
    optimizer.zero_grad()
    out = seq(input)
    loss = criterion(out, target)
    loss.backward()
    return loss


for i in range(3):
    loss = optimizer.step(closure)
    print(f"STEP: {i} loss: {loss.item():.8f}")
    with torch.no_grad():
        future = 20
        pred = seq(test_input, future=future)
        test_loss = criterion(pred[:, :-future], test_target)
        print(f"test loss: {test_loss.item():.8f}")
