# A network whose depth is drawn with Python's random at every forward pass and whose
# middle layer is reused, in the manner of PyTorch's "Control Flow + Weight Sharing"
# example (written for this suite). The step calls random.randint, so its compiled form
# would freeze one draw: it is run eagerly only.
# compat: why="no compiled pass: the step calls Python's random"
import math
import random

import torch


class DynamicNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(()))
        self.b = torch.nn.Parameter(torch.randn(()))
        self.c = torch.nn.Parameter(torch.randn(()))
        self.d = torch.nn.Parameter(torch.randn(()))
        self.e = torch.nn.Parameter(torch.randn(()))

    def forward(self, x):
        y = self.a + self.b * x + self.c * x**2 + self.d * x**3
        for exp in range(4, random.randint(4, 6)):
            y = y + self.e * x**exp
        return y


random.seed(0)
torch.manual_seed(0)
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
model = DynamicNet()
criterion = torch.nn.MSELoss(reduction="sum")
optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
for t in range(1000):
    loss = criterion(model(x), y)
    if t % 250 == 249:
        print(t, "loss", loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
