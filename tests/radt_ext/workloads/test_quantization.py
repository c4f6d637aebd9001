"""quantization: int8 models are smaller and still agree with the float model (CPU)."""
import pytest
import torch

from radt_ext.workloads import quantization
from radt_ext.workloads.torch_data import load
from radt_ext.workloads.torch_models import build, size_bytes


def test_static_int8_shrinks_the_model_and_keeps_predictions():
    torch.manual_seed(0)
    data = load("digits", 32, torch.device("cpu"))
    model = build("small_cnn", 10, data.input_shape, width=8).eval()
    example = (next(iter(data.val))[0],)
    q = quantization.static_int8(model, data.calibration, example, max_batches=4)
    assert size_bytes(q) < size_bytes(model) / 2
    with torch.no_grad():
        agree = (q(example[0]).argmax(1) == model(example[0]).argmax(1)).float().mean()
    assert agree > 0.8


def test_dynamic_int8_quantizes_linear_layers():
    model = build("mlp", 10, (3, 8, 8), width=4).eval()
    q = quantization.dynamic_int8(model)
    assert any("DynamicQuantized" in type(m).__module__ + type(m).__name__ or "quantized" in type(m).__module__ for m in q.modules() if m is not q)
    assert q(torch.randn(2, 3, 8, 8)).shape == (2, 10)


def test_static_int8_refuses_dlrm():
    model = build("dlrm", 2, (13,), dlrm_spec={"dense_features": 13, "num_tables": 2, "table_rows": 10}, embedding_dim=8)
    with pytest.raises(ValueError, match="dynamic_int8"):
        quantization.static_int8(model, [], (torch.randn(2, 13), torch.zeros(2, 2, dtype=torch.long)))


def test_fp8_refuses_on_cpu_with_one_line():
    reason = quantization.refusal("fp8", torch.device("cpu"))
    assert "\n" not in reason and "8.9" in reason
    assert quantization.refusal("static_int8", torch.device("cpu")) is None


@pytest.mark.gpu
def test_fp8_linear_matches_bf16_on_gpu():
    device = torch.device("cuda")
    if quantization.refusal("fp8", device):
        pytest.skip(quantization.refusal("fp8", device))
    lin = torch.nn.Linear(256, 128).to(device)
    x = torch.randn(64, 256, device=device)
    fp8 = quantization.Fp8Linear(lin)
    err = (fp8(x).float() - lin(x)).abs().mean() / lin(x).abs().mean()
    assert err < 0.1
