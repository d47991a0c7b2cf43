"""Deep Q-learning on a small chain, written as PyTorch's DQN tutorial writes it for
CartPole: a ``ReplayMemory`` of ``Transition`` namedtuples in a ``deque``, epsilon-greedy
actions from ``policy_net(state).max(1).indices.view(1, 1)``, batches assembled with
``torch.cat``, ``policy_net(state_batch).gather(1, action_batch)``, a bool mask of the
non-final next states from ``torch.tensor(tuple(map(...)), dtype=torch.bool)``,
``next_state_values[non_final_mask] = target_net(...).max(1).values`` under ``no_grad``,
``nn.SmoothL1Loss``, ``AdamW(amsgrad=True)``, ``clip_grad_value_`` and the target net's
soft update through ``state_dict()``/``load_state_dict()``.

The chain: states 0..3 one-hot, actions left/right, reward 1 for reaching 3 (final).
Prints one ``RESULT {json}`` line with the last optimisation's Q-values, targets and loss
(recomputed by the test), and the soft update's check.
"""

import json
import math
import random
from collections import deque, namedtuple

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.optim as optim

BATCH_SIZE, GAMMA, TAU, LR = 8, 0.9, 0.05, 1e-3
EPS_START, EPS_END, EPS_DECAY = 0.9, 0.05, 50
N = 4
Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class Chain:
    def reset(self):
        self.position = 0
        return self.observe()

    def observe(self):
        state = [0.0] * N
        state[self.position] = 1.0
        return state

    def step(self, action):
        self.position = max(0, self.position + (1 if action == 1 else -1))
        done = self.position == N - 1
        return self.observe(), 1.0 if done else 0.0, done


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
        self.layer1 = nn.Linear(n_observations, 16)
        self.layer2 = nn.Linear(16, 16)
        self.layer3 = nn.Linear(16, n_actions)

    def forward(self, x):
        x = torch.relu(self.layer1(x))
        x = torch.relu(self.layer2(x))
        return self.layer3(x)


random.seed(0)
torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
env = Chain()
policy_net = DQN(N, 2).to(device)
target_net = DQN(N, 2).to(device)
target_net.load_state_dict(policy_net.state_dict())
optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
memory = ReplayMemory(1000)
steps_done = 0


def select_action(state):
    global steps_done
    sample = random.random()
    eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1.0 * steps_done / EPS_DECAY)
    steps_done += 1
    if sample > eps_threshold:
        with torch.no_grad():
            return policy_net(state).max(1).indices.view(1, 1)
    return torch.tensor([[random.randrange(2)]], device=device, dtype=torch.long)


def optimize_model(record):
    if len(memory) < BATCH_SIZE:
        return
    transitions = memory.sample(BATCH_SIZE)
    batch = Transition(*zip(*transitions, strict=True))
    non_final_mask = torch.tensor(
        tuple(map(lambda s: s is not None, batch.next_state)), device=device, dtype=torch.bool
    )
    non_final = [s for s in batch.next_state if s is not None]
    state_batch = torch.cat(batch.state)
    action_batch = torch.cat(batch.action)
    reward_batch = torch.cat(batch.reward)
    state_action_values = policy_net(state_batch).gather(1, action_batch)
    next_state_values = torch.zeros(BATCH_SIZE, device=device)
    with torch.no_grad():
        if non_final:
            non_final_next_states = torch.cat(non_final)
            next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
    expected_state_action_values = (next_state_values * GAMMA) + reward_batch
    criterion = nn.SmoothL1Loss()
    loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
    optimizer.step()
    record.update(q=state_action_values.view(-1).tolist(),
                  target=expected_state_action_values.tolist(), loss=loss.item(),
                  mask=non_final_mask.tolist(), rewards=reward_batch.tolist())  # fmt: skip


record, durations = {}, []
for _episode in range(2):
    state = torch.tensor(env.reset(), dtype=torch.float32, device=device).unsqueeze(0)
    for t in range(12):
        steps = t + 1
        action = select_action(state)
        observation, reward, terminated = env.step(action.item())
        reward = torch.tensor([reward], device=device)
        next_state = (
            None
            if terminated
            else torch.tensor(observation, dtype=torch.float32, device=device).unsqueeze(0)
        )
        memory.push(state, action, next_state, reward)
        state = next_state
        optimize_model(record)
        before = {k: v.clone() for k, v in target_net.state_dict().items()}
        target_net_state_dict = target_net.state_dict()
        policy_net_state_dict = policy_net.state_dict()
        for key in policy_net_state_dict:
            target_net_state_dict[key] = policy_net_state_dict[key] * TAU + \
                target_net_state_dict[key] * (1 - TAU)  # fmt: skip
        target_net.load_state_dict(target_net_state_dict)
        if terminated:
            break
    durations.append(steps)
soft = {
    "before": before["layer3.bias"].tolist(),
    "policy": policy_net.state_dict()["layer3.bias"].tolist(),
    "after": target_net.state_dict()["layer3.bias"].tolist(),
}
print("RESULT " + json.dumps({**record, "soft": soft, "durations": durations,
                              "memory": len(memory)}))  # fmt: skip
