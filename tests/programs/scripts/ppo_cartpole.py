# Proximal policy optimisation in the manner of CleanRL's ppo.py (MIT): an Agent with a
# critic and an actor MLP built by layer_init (orthogonal_ weights, constant_ biases),
# actions from torch.distributions.Categorical(logits=...), rollout buffers of shape
# (num_steps, num_envs) filled step by step, GAE advantages computed in a reversed loop
# with lastgaelam, the learning rate annealed through optimizer.param_groups, minibatches
# from torch.randperm, the clipped surrogate objective with normalised advantages, the
# entropy bonus and the clipped value loss, clip_grad_norm_ and Adam with eps=1e-5 (written for
# this suite; a vectorised cart-pole written with torch tensors instead of gym's
# SyncVectorEnv, auto-resetting the environments that end).
# compat: step=ppo_update loss="loss: (\S+)"
import math

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.distributions.categorical import Categorical

SEED = 1
NUM_ENVS, NUM_STEPS = 8, 32
NUM_ITERATIONS, UPDATE_EPOCHS, NUM_MINIBATCHES = 6, 4, 4
LEARNING_RATE, GAMMA, GAE_LAMBDA = 2.5e-4 * 4, 0.99, 0.95
CLIP_COEF, ENT_COEF, VF_COEF, MAX_GRAD_NORM = 0.2, 0.01, 0.5, 0.5
NORM_ADV, CLIP_VLOSS, TARGET_KL = True, True, None
BATCH_SIZE = NUM_ENVS * NUM_STEPS
MINIBATCH_SIZE = BATCH_SIZE // NUM_MINIBATCHES


class TorchCartPole:
    """A batch of gym's CartPole-v1 (Euler steps of 0.02 s) held as one (n, 4) tensor;
    each environment that terminates or reaches ``max_steps`` is reset in place."""

    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_threshold, x_threshold = 12 * 2 * math.pi / 360, 2.4

    def __init__(self, num_envs, max_steps=100, device="cpu"):
        self.num_envs, self.max_steps, self.device = num_envs, max_steps, device
        self.total_mass = self.masspole + self.masscart
        self.polemass_length = self.masspole * self.length

    def reset(self):
        self.state = torch.empty(self.num_envs, 4, device=self.device).uniform_(-0.05, 0.05)
        self.t = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        return self.state.clone()

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state.unbind(1)
        force = torch.where(action == 1, self.force_mag, -self.force_mag)
        costheta, sintheta = torch.cos(theta), torch.sin(theta)
        temp = (force + self.polemass_length * theta_dot**2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta**2 / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = torch.stack([x, x_dot, theta, theta_dot], dim=1)
        self.t += 1
        terminated = (x.abs() > self.x_threshold) | (theta.abs() > self.theta_threshold)
        truncated = self.t >= self.max_steps
        reward = torch.ones(self.num_envs, device=self.device)
        done = terminated | truncated
        if done.any():
            fresh = torch.empty_like(self.state).uniform_(-0.05, 0.05)
            self.state = torch.where(done.unsqueeze(1), fresh, self.state)
            self.t[done] = 0
        return self.state.clone(), reward, terminated, truncated


SQRT2 = np.sqrt(2)


def layer_init(layer, std=SQRT2, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim, n_actions):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, n_actions), std=0.01),
        )

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


torch.manual_seed(SEED)
np.random.seed(SEED)
torch.backends.cudnn.deterministic = True
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

envs = TorchCartPole(NUM_ENVS, device=device)
agent = Agent(4, 2).to(device)
optimizer = optim.Adam(agent.parameters(), lr=LEARNING_RATE, eps=1e-5)

obs = torch.zeros((NUM_STEPS, NUM_ENVS, 4)).to(device)
actions = torch.zeros((NUM_STEPS, NUM_ENVS)).to(device)
logprobs = torch.zeros((NUM_STEPS, NUM_ENVS)).to(device)
rewards = torch.zeros((NUM_STEPS, NUM_ENVS)).to(device)
dones = torch.zeros((NUM_STEPS, NUM_ENVS)).to(device)
values = torch.zeros((NUM_STEPS, NUM_ENVS)).to(device)


def ppo_update(mb_obs, mb_actions, mb_logprobs, mb_advantages, mb_returns, mb_values):
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(mb_obs, mb_actions.long())
    logratio = newlogprob - mb_logprobs
    ratio = logratio.exp()
    with torch.no_grad():
        # calculate approx_kl http://joschu.net/blog/kl-approx.html
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > CLIP_COEF).float().mean()

    if NORM_ADV:
        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
    pg_loss1 = -mb_advantages * ratio
    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - CLIP_COEF, 1 + CLIP_COEF)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()

    newvalue = newvalue.view(-1)
    if CLIP_VLOSS:
        v_loss_unclipped = (newvalue - mb_returns) ** 2
        v_clipped = mb_values + torch.clamp(newvalue - mb_values, -CLIP_COEF, CLIP_COEF)
        v_loss_clipped = (v_clipped - mb_returns) ** 2
        v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
        v_loss = 0.5 * v_loss_max.mean()
    else:
        v_loss = 0.5 * ((newvalue - mb_returns) ** 2).mean()
    entropy_loss = entropy.mean()
    loss = pg_loss - ENT_COEF * entropy_loss + v_loss * VF_COEF

    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(agent.parameters(), MAX_GRAD_NORM)
    optimizer.step()
    return loss, pg_loss, v_loss, approx_kl, clipfrac


next_obs = envs.reset()
next_done = torch.zeros(NUM_ENVS).to(device)
episode_returns, running = [], torch.zeros(NUM_ENVS)
for iteration in range(1, NUM_ITERATIONS + 1):
    frac = 1.0 - (iteration - 1.0) / NUM_ITERATIONS
    optimizer.param_groups[0]["lr"] = frac * LEARNING_RATE

    for step in range(NUM_STEPS):
        obs[step] = next_obs
        dones[step] = next_done
        with torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step] = value.flatten()
        actions[step] = action
        logprobs[step] = logprob
        next_obs, reward, terminations, truncations = envs.step(action)
        next_done = (terminations | truncations).float()
        rewards[step] = reward.view(-1)
        running += reward.cpu()
        for i in torch.nonzero(next_done).flatten().tolist():
            episode_returns.append(running[i].item())
            running[i] = 0.0

    with torch.no_grad():
        next_value = agent.get_value(next_obs).reshape(1, -1)
        advantages = torch.zeros_like(rewards)
        lastgaelam = 0
        for t in reversed(range(NUM_STEPS)):
            if t == NUM_STEPS - 1:
                nextnonterminal = 1.0 - next_done
                nextvalues = next_value
            else:
                nextnonterminal = 1.0 - dones[t + 1]
                nextvalues = values[t + 1]
            delta = rewards[t] + GAMMA * nextvalues * nextnonterminal - values[t]
            advantages[t] = lastgaelam = delta + GAMMA * GAE_LAMBDA * nextnonterminal * lastgaelam
        returns = advantages + values

    b_obs = obs.reshape((-1, 4))
    b_logprobs = logprobs.reshape(-1)
    b_actions = actions.reshape(-1)
    b_advantages = advantages.reshape(-1)
    b_returns = returns.reshape(-1)
    b_values = values.reshape(-1)

    total, kls, clipfracs = 0.0, [], []
    for _epoch in range(UPDATE_EPOCHS):
        b_inds = torch.randperm(BATCH_SIZE)
        for start in range(0, BATCH_SIZE, MINIBATCH_SIZE):
            mb_inds = b_inds[start : start + MINIBATCH_SIZE]
            loss, pg_loss, v_loss, approx_kl, clipfrac = ppo_update(
                b_obs[mb_inds],
                b_actions[mb_inds],
                b_logprobs[mb_inds],
                b_advantages[mb_inds],
                b_returns[mb_inds],
                b_values[mb_inds],
            )
            total += loss.item()
            kls.append(approx_kl.item())
            clipfracs.append(clipfrac.item())
        if TARGET_KL is not None and approx_kl > TARGET_KL:
            break

    y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
    var_y = np.var(y_true)
    explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
    mean_return = np.mean(episode_returns[-10:]) if episode_returns else float("nan")
    print(
        f"iteration {iteration} lr {optimizer.param_groups[0]['lr']:.6f} "
        f"return {mean_return:.1f} kl {np.mean(kls):.5f} clipfrac {np.mean(clipfracs):.3f} "
        f"explained_var {explained_var:.3f} loss: {total / (UPDATE_EPOCHS * NUM_MINIBATCHES):.6f}"
    )
