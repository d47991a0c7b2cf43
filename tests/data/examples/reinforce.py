"""REINFORCE on a 1-D corridor, written as pytorch/examples'
``reinforcement_learning/reinforce.py`` writes it for CartPole: a policy of ``Linear``,
``Dropout`` and ``F.softmax(dim=1)``; each action drawn from
``torch.distributions.Categorical(probs)`` with its ``log_prob`` kept; discounted returns
gathered in a ``collections.deque``, made a tensor with ``torch.tensor(returns)`` and
normalised with ``(returns - returns.mean()) / (returns.std() + eps)`` where ``eps`` is
``np.finfo(np.float32).eps.item()``; the loss ``torch.cat(policy_loss).sum()``.

The corridor: the agent starts in the middle, moves left or right and gets 1 at the
right end (an episode ends there, at the left end or after 20 steps).  Prints one
``RESULT {json}`` line with the last episode's rewards, returns, log-probabilities and
loss (recomputed by the test) and the running reward.
"""

import argparse
import json
from collections import deque
from itertools import count

import numpy as np

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
import kernbench.torch.optim as optim
from kernbench.torch.distributions import Categorical

parser = argparse.ArgumentParser(description="REINFORCE on a corridor")
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--seed", type=int, default=543)
parser.add_argument("--episodes", type=int, default=6)
args = parser.parse_args()


class Corridor:
    """Positions 0..6; start at 3; reward 1 for reaching 6."""

    def __init__(self, length=7, limit=20):
        self.length, self.limit = length, limit
        self.rng = np.random.default_rng()

    def reset(self, seed=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.position, self.steps = self.length // 2, 0
        return self.observe(), {}

    def observe(self):
        state = np.zeros(self.length, dtype=np.float64)
        state[self.position] = 1.0
        return state

    def step(self, action):
        self.position += 1 if action == 1 else -1
        self.steps += 1
        reward = 1.0 if self.position == self.length - 1 else 0.0
        terminated = self.position in (0, self.length - 1)
        return self.observe(), reward, terminated, self.steps >= self.limit, {}


env = Corridor()
env.reset(seed=args.seed)
torch.manual_seed(args.seed)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(7, 16)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(16, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.dropout(self.affine1(x)))
        return F.softmax(self.affine2(x), dim=1)


policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=1e-2)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    state = torch.from_numpy(state).float().unsqueeze(0)
    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode():
    R = 0
    policy_loss = []
    returns = deque()
    for r in policy.rewards[::-1]:
        R = r + args.gamma * R
        returns.appendleft(R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns, strict=True):
        policy_loss.append(-log_prob * R)
    record = {
        "rewards": list(policy.rewards),
        "returns": returns.tolist(),
        "log_probs": [lp.item() for lp in policy.saved_log_probs],
    }
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    record["loss"] = policy_loss.item()
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    return record


running_reward = 0
for i_episode in count(1):
    state, _ = env.reset()
    ep_reward = 0
    for t in range(1, 10000):
        action = select_action(state)
        state, reward, terminated, truncated, _ = env.step(action)
        steps = t
        policy.rewards.append(reward)
        ep_reward += reward
        if terminated or truncated:
            break
    running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
    last = finish_episode()
    if i_episode == args.episodes:
        break
print("RESULT " + json.dumps({**last, "gamma": args.gamma, "eps": eps, "steps": steps,
                              "running_reward": running_reward}))  # fmt: skip
