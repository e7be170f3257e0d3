"""``examples/train_cnn.py`` written in PyTorch: the same images (its ``make_shapes``), the
same network, optimizer, schedule, batch size and checkpoint-and-resume, for comparing
epoch times (``python -m benchmarks --filter CNN``) and results.

Run it with ``python -m benchmarks.cnn_torch``; it prints what the mdtensor program prints.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

_EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_cnn.py"


def example():
    """``examples/train_cnn.py`` as a module (its data, sizes and target)."""
    spec = importlib.util.spec_from_file_location("train_cnn", _EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_model(classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 3 * 3, classes))


def make_training(model: nn.Module):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    return opt, sched


def train_epoch(model, opt, x, y, generator: torch.Generator, batch: int) -> float:
    model.train()
    order = torch.argsort(torch.rand(x.shape[0], generator=generator))
    total = 0.0
    for start in range(0, x.shape[0], batch):
        idx = order[start:start + batch]
        opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        total += loss.item() * idx.shape[0]
    return total / x.shape[0]


def accuracy(model, x, y) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def load_data(ex, n: int, seed: int):
    images, labels = ex.make_shapes(n, seed)
    return torch.from_numpy(images), torch.from_numpy(labels)


def run(ex, epochs: int, stop_at: int | None, checkpoint: str, x, y):
    torch.manual_seed(0)
    shuffle = torch.Generator().manual_seed(2)
    model = make_model(ex.CLASSES)
    opt, sched = make_training(model)
    epoch = 0
    while epoch < epochs:
        start = time.perf_counter()
        loss = train_epoch(model, opt, x, y, shuffle, ex.BATCH)
        sched.step()
        epoch += 1
        if stop_at is not None:
            print(f"epoch {epoch:2d}  loss {loss:.4f}  lr {sched.get_last_lr()[0]:.4f}  "
                  f"{time.perf_counter() - start:.2f} s")
        if epoch == stop_at:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict(), "shuffle": shuffle.get_state(),
                        "epoch": epoch}, checkpoint)
            state = torch.load(checkpoint)
            model = make_model(ex.CLASSES)
            opt, sched = make_training(model)
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
            shuffle = torch.Generator()
            shuffle.set_state(state["shuffle"])
            epoch = state["epoch"]
    return model


def main(epochs: int = 8) -> int:
    torch.set_num_threads(1)
    ex = example()
    x, y = load_data(ex, 2048, 1)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        model = run(ex, epochs, epochs // 2, os.path.join(tmp, "checkpoint.pt"), x, y)
    elapsed = time.perf_counter() - start
    acc = accuracy(model, *load_data(ex, 1000, 3))
    print(f"held-out accuracy {acc:.3f} on cpu in {elapsed:.1f} s")
    return 0 if acc >= ex.TARGET_ACCURACY else 1


if __name__ == "__main__":
    sys.exit(main())
