# Actor-critic policy gradient in the manner of PyTorch's reinforcement_learning example
# actor_critic.py (BSD-3-Clause): one network with an action head (softmax) and a value
# head, actions drawn from torch.distributions.Categorical and their log_prob kept as
# SavedAction namedtuples, discounted returns normalised with eps, the policy loss
# -log_prob * advantage plus F.smooth_l1_loss for the value, Adam, and the running reward
# (written for this suite; a small cart-pole simulated with NumPy instead of gym's
# CartPole-v1; the step compiled is finish_episode recomputing the episode's
# log-probabilities and values from its states, so the graph lies inside it, the episode
# padded to the step limit under a mask so that its shapes stay the same).
# compat: step=finish_episode loss="loss (\S+)"
import math
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

GAMMA, SEED, LOG_INTERVAL = 0.99, 543, 5


class CartPole:
    """gym's CartPole-v1 dynamics (Euler steps, 0.02 s), truncated at ``max_steps``."""

    def __init__(self, seed, max_steps=80):
        self.rng, self.max_steps = np.random.default_rng(seed), max_steps

    def reset(self):
        self.state, self.t = self.rng.uniform(-0.05, 0.05, size=4), 0
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot**2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc
        self.state, self.t = np.array([x, x_dot, theta, theta_dot]), self.t + 1
        done = abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360 or self.t >= self.max_steps
        return self.state.astype(np.float32), 1.0, done


env = CartPole(SEED)
torch.manual_seed(SEED)

SavedAction = namedtuple("SavedAction", ["log_prob", "value"])


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 128)
        self.action_head = nn.Linear(128, 2)
        self.value_head = nn.Linear(128, 1)
        self.saved_actions, self.saved_states, self.rewards = [], [], []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values


model = Policy()
optimizer = optim.Adam(model.parameters(), lr=3e-2)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    state = torch.from_numpy(state).float()
    with torch.no_grad():
        probs, state_value = model(state)
    m = Categorical(probs)
    action = m.sample()
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
    model.saved_states.append(state)
    return action.item()


def finish_episode(states, actions, returns, mask):
    probs, values = model(states)
    log_probs = Categorical(probs).log_prob(actions)
    advantage = returns - values.squeeze(-1).detach()
    policy_loss = (-log_probs * advantage * mask).sum()
    value_loss = (F.smooth_l1_loss(values.squeeze(-1), returns, reduction="none") * mask).sum()
    optimizer.zero_grad()
    loss = policy_loss + value_loss
    loss.backward()
    optimizer.step()
    return loss


def main():
    running_reward = 10
    for i_episode in range(1, 31):
        state, ep_reward, actions = env.reset(), 0, []
        for _ in range(1, 10000):
            action = select_action(state)
            actions.append(action)
            state, reward, done = env.step(action)
            model.rewards.append(reward)
            ep_reward += reward
            if done:
                break
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        R, returns = 0, []
        for r in model.rewards[::-1]:
            R = r + GAMMA * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        pad = env.max_steps - len(actions)
        mask = F.pad(torch.ones(len(actions)), (0, pad))
        states = F.pad(torch.stack(model.saved_states), (0, 0, 0, pad))
        actions = F.pad(torch.tensor(actions), (0, pad))
        loss = finish_episode(states, actions, F.pad(returns, (0, pad)), mask)
        del model.rewards[:], model.saved_actions[:], model.saved_states[:]
        if i_episode % LOG_INTERVAL == 0:
            print(
                f"Episode {i_episode}\tLast reward: {ep_reward:.2f}\tAverage reward: {running_reward:.2f}\tloss {loss.item():.6f}"
            )


main()
