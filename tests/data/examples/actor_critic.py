"""Actor-critic on a small walk, written as pytorch/examples'
``reinforcement_learning/actor_critic.py`` writes it for CartPole: one network with an
action head (``F.softmax(dim=-1)``) and a value head, 1-D states (no batch dimension),
``SavedAction`` namedtuples of ``m.log_prob(action)`` and the value, returns made a tensor
from a list and normalised, the advantage ``R - value.item()``, the critic's loss
``F.smooth_l1_loss(value, torch.tensor([R]))`` with ``R`` a 0-d tensor, and the total
``torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()``.

The walk: a position in [-3, 3] seen as ``[x / 3, 1]``; reaching +3 pays 1, -3 pays -1,
and an episode ends there or after 15 steps.  Prints one ``RESULT {json}`` line with the
last episode's rewards, returns, log-probabilities, values and loss (recomputed by the
test).
"""

import argparse
import json
from collections import namedtuple
from itertools import count

import numpy as np

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
import kernbench.torch.optim as optim
from kernbench.torch.distributions import Categorical

parser = argparse.ArgumentParser(description="actor-critic on a walk")
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--seed", type=int, default=7)
parser.add_argument("--episodes", type=int, default=5)
args = parser.parse_args()


class Walk:
    def reset(self, seed=None):
        self.x, self.t = 0, 0
        return np.array([0.0, 1.0]), {}

    def step(self, action):
        self.x += 1 if action == 1 else -1
        self.t += 1
        reward = {3: 1.0, -3: -1.0}.get(self.x, 0.0)
        state = np.array([self.x / 3.0, 1.0])
        return state, reward, abs(self.x) == 3, self.t >= 15, {}


env = Walk()
env.reset(seed=args.seed)
torch.manual_seed(args.seed)
SavedAction = namedtuple("SavedAction", ["log_prob", "value"])


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(2, 16)
        self.action_head = nn.Linear(16, 2)
        self.value_head = nn.Linear(16, 1)
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        return action_prob, self.value_head(x)


model = Policy()
optimizer = optim.Adam(model.parameters(), lr=3e-2)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    state = torch.from_numpy(state).float()
    probs, state_value = model(state)
    m = Categorical(probs)
    action = m.sample()
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
    return action.item()


def finish_episode():
    R = 0
    saved_actions = model.saved_actions
    policy_losses, value_losses, returns = [], [], []
    for r in model.rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for (log_prob, value), R in zip(saved_actions, returns, strict=True):
        advantage = R - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
    record = {
        "rewards": list(model.rewards),
        "returns": returns.tolist(),
        "log_probs": [a.log_prob.item() for a in saved_actions],
        "values": [a.value.item() for a in saved_actions],
        "value_shape": list(saved_actions[0].value.shape),
    }
    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
    loss.backward()
    optimizer.step()
    record["loss"] = loss.item()
    del model.rewards[:]
    del model.saved_actions[:]
    return record


running_reward = 0
for i_episode in count(1):
    state, _ = env.reset()
    ep_reward = 0
    for t in range(1, 10000):
        action = select_action(state)
        state, reward, terminated, truncated, _ = env.step(action)
        steps = t
        model.rewards.append(reward)
        ep_reward += reward
        if terminated or truncated:
            break
    running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
    last = finish_episode()
    if i_episode == args.episodes:
        break
print("RESULT " + json.dumps({**last, "steps": steps, "running_reward": running_reward}))
