# A custom autograd.Function with its own forward and backward, used inside a model
# trained by gradient descent, in the manner of PyTorch's "Defining new autograd
# functions" tutorial (written for this suite).
# compat: step=step
import math

import torch


class Cubic(torch.autograd.Function):
    """0.5 * (5 x^3 - 3 x), the Legendre polynomial of degree 3."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input**3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input**2 - 1)


torch.manual_seed(0)
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
a = torch.full((), 0.0, requires_grad=True)
b = torch.full((), -1.0, requires_grad=True)
c = torch.full((), 0.0, requires_grad=True)
d = torch.full((), 0.3, requires_grad=True)
learning_rate = 5e-6


def step():
    y_pred = a + b * Cubic.apply(c + d * x)
    loss = (y_pred - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        for p in (a, b, c, d):
            p -= learning_rate * p.grad
            p.grad = None
    return loss


for t in range(600):
    loss = step()
    if t % 200 == 199:
        print(t, "loss", loss.item())
print(f"Result: y = {a.item()} + {b.item()} * P3({c.item()} + {d.item()} x)")
