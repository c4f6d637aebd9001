"""The recipes' AdamW: torch's AdamW update without torch.optim's first-call import of torch._dynamo."""
import copy
import subprocess
import sys

import pytest
import torch

from radt_ext.workloads.torch_optim import AdamW

TINY = ["--epochs", "1", "--train-samples", "64", "--val-samples", "32", "--batch-size", "32",
        "--width", "4", "--infer-iters", "1"]


@pytest.mark.parametrize("scaled", [False, True])
def test_same_parameters_as_torch_optim_adamw(scaled):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    frozen = torch.nn.Linear(3, 3)
    frozen.requires_grad_(False)
    ours, theirs = (torch.nn.Sequential(copy.deepcopy(model), copy.deepcopy(frozen)) for _ in range(2))
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    for net, opt in ((ours, AdamW(ours.parameters(), lr=0.05, weight_decay=0.1)),
                     (theirs, torch.optim.AdamW(theirs.parameters(), lr=0.05, weight_decay=0.1))):
        scaler = torch.amp.GradScaler("cpu", enabled=scaled)
        for _ in range(6):
            opt.zero_grad(set_to_none=True)
            scaler.scale(torch.nn.functional.cross_entropy(net(x), y)).backward()
            scaler.step(opt)
            scaler.update()
    for a, b in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(ours[0][0].weight, model[0].weight)  # it did train


def test_recipe_reaches_its_first_step_without_importing_dynamo(tracking_uri):
    # -X importtime writes each import to stderr as it ends, so the lines before the recipe's
    # "first step" line are the imports made before its first training step
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "radt_ext.workloads.torch_train", *TINY],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = done.stderr.split("radt-ext: first step")
    imported = lambda text: {line.rsplit("|", 1)[1].strip() for line in text.splitlines() if line.startswith("import time:")}  # noqa: E731
    assert "torch.nn" in imported(before) and "torch._dynamo" in imported(after)  # the record works
    assert "torch._dynamo" not in imported(before)
