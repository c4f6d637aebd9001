"""pruning: the masks and rebuilt layers do what they claim on real models (CPU)."""
import pytest
import torch

from radt_ext.workloads import pruning
from radt_ext.workloads.torch_models import build, param_counts


@pytest.mark.parametrize("sparsity", [0.3, 0.7])
def test_unstructured_reaches_global_sparsity_and_becomes_permanent(sparsity):
    model = build("small_cnn", 10, (3, 32, 32), width=8)
    pruning.apply_unstructured(model, sparsity)
    pruning.make_permanent(model)
    assert not any(hasattr(m, "weight_mask") for m in model.modules())
    weights = [m.weight for m, _ in pruning.prunable(model)]
    zeros = sum(int((w == 0).sum()) for w in weights)
    assert zeros / sum(w.numel() for w in weights) == pytest.approx(sparsity, abs=0.01)


@pytest.mark.parametrize("name,shape", [
    ("small_cnn", (3, 32, 32)), ("resnet18", (3, 32, 32)), ("resnet50", (3, 32, 32)),
    ("mobilenet_v2", (3, 32, 32)), ("vgg16", (3, 32, 32)), ("vit", (3, 8, 8)), ("mlp", (3, 8, 8)),
])
def test_structured_really_shrinks_layers_and_still_runs(name, shape):
    torch.manual_seed(0)
    model = build(name, 10, shape, width=8).eval()
    before, _ = param_counts(model)
    chains = pruning.apply_structured(model, 0.5)
    after, nonzero = param_counts(model)
    assert chains > 0 and after < before * 0.9
    assert nonzero == pytest.approx(after, rel=0.01)  # smaller layers, not zeroed ones
    assert model(torch.randn(2, *shape)).shape == (2, 10)


def test_structured_keeps_the_strongest_channels():
    model = build("small_cnn", 10, (3, 32, 32), width=4)
    conv = model.features[0]
    with torch.no_grad():
        conv.weight.mul_(0.01)
        conv.weight[1] += 1.0
        conv.weight[3] += 2.0
    pruning.apply_structured(model, 0.5)
    kept = model.features[0].weight
    assert kept.shape[0] == 2
    assert torch.allclose(kept.abs().flatten(1).sum(1), conv.weight[[1, 3]].abs().flatten(1).sum(1))


def test_24_masks_keep_two_of_every_four():
    model = build("mlp", 10, (1, 8, 8), width=4)  # 128 hidden units: eligible
    assert pruning.apply_24_masks(model) >= 1
    pruning.make_permanent(model)
    w = model.net[3].weight.reshape(-1, 4)
    assert bool(((w != 0).sum(1) <= 2).all())


def test_semi24_refuses_on_cpu_with_one_line():
    reason = pruning.semi24_refusal(torch.device("cpu"))
    assert "\n" not in reason and "semi24" in reason and "unstructured" in reason


@pytest.mark.gpu
def test_semi24_converts_only_layers_that_pay_on_gpu():
    device = torch.device("cuda")
    if pruning.semi24_refusal(device):
        pytest.skip(pruning.semi24_refusal(device))
    model = build("mlp", 10, (1, 64, 64), width=128).to(device)
    pruning.apply_24_masks(model)
    pruning.make_permanent(model)
    model.half()
    decisions = pruning.convert_24(model, batch_rows=4096)
    assert decisions and all(("speedup" in d) or ("why" in d) for d in decisions)
