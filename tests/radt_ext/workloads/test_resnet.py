"""The in-repo ResNet-18 is torchvision's: same layers, names, shapes, parameter count, initialisation
and outputs (CPU)."""
import pytest
import torch

from radt_ext.workloads.resnet import ResNet18

tvm = pytest.importorskip("torchvision.models")


def test_resnet18_is_torchvisions_network():
    torch.manual_seed(3)
    ours = ResNet18(num_classes=10)
    torch.manual_seed(3)
    theirs = tvm.resnet18(weights=None, num_classes=10)
    names = lambda net: [(n, type(m).__name__) for n, m in net.named_modules()]  # noqa: E731
    assert names(ours) == [(n, "ResNet18" if t == "ResNet" else t) for n, t in names(theirs)]
    assert repr(ours).replace("ResNet18", "ResNet") == repr(theirs)  # every layer's hyper-parameters
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters()) == 11_181_642
    mine, ref = ours.state_dict(), theirs.state_dict()
    assert mine.keys() == ref.keys()
    assert all(torch.equal(mine[k], ref[k]) for k in ref)  # the same random draws, in the same order
    x = torch.randn(4, 3, 32, 32)
    for mode in ("train", "eval"):
        getattr(ours, mode)(), getattr(theirs, mode)()
        assert torch.equal(ours(x), theirs(x))
