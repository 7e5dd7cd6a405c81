# Deep Q-learning in the manner of PyTorch's reinforcement_q_learning tutorial: a replay
# memory of Transition namedtuples (deque, random.sample), an epsilon-greedy policy
# decaying with math.exp, a policy and a target network (three Linear layers), the
# batch's Q values by gather, the next states' values by max(1).values written through a
# boolean mask of non-final states, SmoothL1Loss, AdamW with amsgrad, clip_grad_value_
# and the target network's soft update through state_dict and load_state_dict (written
# for this suite; a small cart-pole simulated with NumPy instead of gym's CartPole-v1;
# the step compiled is the tutorial's optimize_model after the replay sample: the targets'
# write through the mask of non-final states, whose count of True entries is data, the
# policy network's loss and update).
# compat: step=optimize_step loss="loss (\S+)"
import math
import random
from collections import deque, namedtuple
from itertools import count

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


class CartPole:
    """gym's CartPole-v1 dynamics (Euler steps, 0.02 s): a pole falls past 12 degrees or
    the cart leaves [-2.4, 2.4]; reward 1 a step, truncated at ``max_steps``."""

    def __init__(self, seed, max_steps=60):
        self.rng, self.max_steps = np.random.default_rng(seed), max_steps

    def reset(self):
        self.state, self.t = self.rng.uniform(-0.05, 0.05, size=4), 0
        return self.state.astype(np.float32), {}

    def sample_action(self):
        return int(self.rng.integers(2))

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
        terminated = bool(abs(x) > 2.4 or abs(theta) > 12 * 2 * math.pi / 360)
        return self.state.astype(np.float32), 1.0, terminated, self.t >= self.max_steps, {}


Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class ReplayMemory:
    def __init__(self, capacity):
        self.memory = deque([], maxlen=capacity)

    def push(self, *args):
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class DQN(nn.Module):
    def __init__(self, n_observations, n_actions):
        super().__init__()
        self.layer1 = nn.Linear(n_observations, 32)
        self.layer2 = nn.Linear(32, 32)
        self.layer3 = nn.Linear(32, n_actions)

    def forward(self, x):
        x = torch.relu(self.layer1(x))
        x = torch.relu(self.layer2(x))
        return self.layer3(x)


BATCH_SIZE, GAMMA, EPS_START, EPS_END = 16, 0.99, 0.9, 0.05  # edit: size
EPS_DECAY, TAU, LR = 200, 0.005, 1e-3
torch.manual_seed(0)
random.seed(0)
env = CartPole(seed=0)
policy_net, target_net = DQN(4, 2), DQN(4, 2)
target_net.load_state_dict(policy_net.state_dict())
optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
memory = ReplayMemory(1000)
criterion = nn.SmoothL1Loss()
steps_done = 0


def select_action(state):
    global steps_done
    sample = random.random()
    eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1.0 * steps_done / EPS_DECAY)
    steps_done += 1
    if sample > eps_threshold:
        with torch.no_grad():
            return policy_net(state).max(1).indices.view(1, 1)
    return torch.tensor([[env.sample_action()]], dtype=torch.long)


def optimize_step(state_batch, action_batch, reward_batch, non_final_mask, non_final_next_states):
    state_action_values = policy_net(state_batch).gather(1, action_batch)
    next_state_values = torch.zeros(BATCH_SIZE)
    with torch.no_grad():
        next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
    expected_state_action_values = (next_state_values * GAMMA) + reward_batch
    loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
    optimizer.step()
    return loss


def optimize_model():
    if len(memory) < BATCH_SIZE:
        return None
    batch = Transition(*zip(*memory.sample(BATCH_SIZE)))
    non_final_mask = torch.tensor(
        tuple(map(lambda s: s is not None, batch.next_state)), dtype=torch.bool
    )
    non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
    return optimize_step(
        torch.cat(batch.state),
        torch.cat(batch.action),
        torch.cat(batch.reward),
        non_final_mask,
        non_final_next_states,
    )


episode_durations = []
for i_episode in range(6):  # edit: size
    state, info = env.reset()
    state = torch.tensor(state, dtype=torch.float32).unsqueeze(0)
    total = 0.0
    for t in count():
        action = select_action(state)
        observation, reward, terminated, truncated, _ = env.step(action.item())
        reward = torch.tensor([reward])
        done = terminated or truncated
        next_state = None if terminated else torch.tensor(observation).unsqueeze(0)
        memory.push(state, action, next_state, reward)
        state = next_state
        loss = optimize_model()
        total += 0.0 if loss is None else loss.item()
        target_net_state_dict = target_net.state_dict()
        policy_net_state_dict = policy_net.state_dict()
        for key in policy_net_state_dict:
            target_net_state_dict[key] = policy_net_state_dict[key] * TAU + target_net_state_dict[
                key
            ] * (1 - TAU)
        target_net.load_state_dict(target_net_state_dict)
        if done:
            episode_durations.append(t + 1)
            break
    print(f"episode {i_episode} duration {t + 1} loss {total / (t + 1):.6f}")
