"""The programs in ``examples/`` run and reach what their docstrings state."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from _helpers import TEST_DEVICE

ROOT = Path(__file__).resolve().parent.parent


def test_train_mlp_reaches_its_accuracy_and_resumes_exactly():
    # The full run on the CPU (a few seconds); elsewhere fewer epochs (JAX dispatches each
    # op eagerly: the 20 epochs take ~30 s there).
    epochs = "20" if TEST_DEVICE == "cpu" else "4"
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "train_mlp.py"), "--device",
                        TEST_DEVICE, "--epochs", epochs], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    accuracy = float(re.search(r"held-out accuracy (\S+)", r.stdout).group(1))
    assert accuracy >= 0.95
    assert "checkpoint saved at epoch" in r.stdout
    assert "resumed run equals the uninterrupted run: True" in r.stdout


def test_train_cnn_reaches_its_accuracy_and_resumes_exactly():
    # The full run on the CPU (~10 s); elsewhere two epochs on 256 images (JAX dispatches
    # each op eagerly), which checks that it runs and resumes exactly, not the accuracy.
    args = [] if TEST_DEVICE == "cpu" else ["--epochs", "2", "--train", "256"]
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "train_cnn.py"), "--device",
                        TEST_DEVICE, *args], capture_output=True, text=True, timeout=600)
    assert "resumed run equals the uninterrupted run: True" in r.stdout, \
        r.stdout[-2000:] + r.stderr[-2000:]
    assert "checkpoint saved at epoch" in r.stdout
    accuracy = float(re.search(r"held-out accuracy (\S+)", r.stdout).group(1))
    if TEST_DEVICE == "cpu":
        assert r.returncode == 0 and accuracy >= 0.95, r.stdout[-2000:]
