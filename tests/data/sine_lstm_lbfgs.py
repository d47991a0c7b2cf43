"""Sine waves continued by two stacked ``nn.LSTMCell`` layers, fitted with ``optim.LBFGS``,
the training flow of pytorch/examples' ``time_sequence_prediction`` written for KernBench.

The waves are made here with NumPy (phase-shifted sines, in float64); the model reads a
wave one sample at a time, is trained on all but three of them with LBFGS and a closure
(MSE of the next-sample prediction), then continues the three held-out waves ``--future``
samples past their end under ``torch.no_grad()`` and plots them (matplotlib, Agg) into
``wave<step>.png``.  Prints one ``RESULT {json}`` line: the loss each ``step`` returned,
every loss the closure computed, the held-out losses, LBFGS's state counters and the
prediction's shape.
"""

import argparse
import json

import matplotlib
import numpy as np

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.optim as optim

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend first

PERIOD = 20
SAMPLES = 6
WAVES = 6
HIDDEN = 12


def make_waves(seed: int = 2) -> np.ndarray:
    rng = np.random.RandomState(seed)
    start = rng.randint(-4 * PERIOD, 4 * PERIOD, WAVES).reshape(WAVES, 1)
    return np.sin((np.arange(SAMPLES) + start) / PERIOD).astype("float64")


class Predictor(nn.Module):
    def __init__(self, hidden: int = HIDDEN):
        super().__init__()
        self.hidden = hidden
        self.first = nn.LSTMCell(1, hidden)
        self.second = nn.LSTMCell(hidden, hidden)
        self.head = nn.Linear(hidden, 1)

    def step(self, sample, states):
        (h1, c1), (h2, c2) = states
        h1, c1 = self.first(sample, (h1, c1))
        h2, c2 = self.second(h1, (h2, c2))
        return self.head(h2), ((h1, c1), (h2, c2))

    def forward(self, waves, future=0):
        zeros = torch.zeros(waves.size(0), self.hidden, dtype=torch.double)
        states = ((zeros, zeros), (zeros, zeros))
        predicted = []
        for sample in waves.split(1, dim=1):
            guess, states = self.step(sample, states)
            predicted.append(guess)
        for _ in range(future):
            guess, states = self.step(guess, states)
            predicted.append(guess)
        return torch.cat(predicted, dim=1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--max-iter", type=int, default=20)
    parser.add_argument("--future", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    waves = make_waves()
    seen, after = torch.from_numpy(waves[3:, :-1]), torch.from_numpy(waves[3:, 1:])
    held, held_after = torch.from_numpy(waves[:3, :-1]), torch.from_numpy(waves[:3, 1:])
    model = Predictor().double()
    mse = nn.MSELoss()
    optimizer = optim.LBFGS(model.parameters(), lr=0.8, max_iter=args.max_iter)
    returned, evaluated, held_losses = [], [], []
    for step in range(args.steps):
        evaluated.append([])

        def closure():
            optimizer.zero_grad()
            loss = mse(model(seen), after)
            evaluated[-1].append(loss.item())
            loss.backward()
            return loss

        returned.append(optimizer.step(closure).item())
        with torch.no_grad():
            guess = model(held, future=args.future)
            held_losses.append(mse(guess[:, : -args.future], held_after).item())
        curves = guess.numpy()
        figure, axes = plt.subplots(figsize=(8, 3))
        for row, colour in zip(curves, "rgb", strict=True):
            axes.plot(range(held.size(1)), row[: held.size(1)], colour)
            axes.plot(range(held.size(1), len(row)), row[held.size(1) :], colour + ":")
        figure.savefig(f"wave{step}.png")
        plt.close(figure)
    state = optimizer.state[next(model.parameters())]
    print(
        "RESULT "
        + json.dumps(
            {
                "returned": returned,
                "evaluated": evaluated,
                "held": held_losses,
                "func_evals": state["func_evals"],
                "n_iter": state["n_iter"],
                "shape": list(curves.shape),
            }
        )
    )
