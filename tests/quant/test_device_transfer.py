"""A quantized model's state moves between models and devices: the same FP32 model quantized again (as the trainer
does it: model on the device, graph on the CPU) and given the first one's state_dict computes the same outputs and
gradients in float64. On the CPU this is the checkpoint-resume property; with ``-m gpu`` the copy runs on CUDA, which
checks every quantizer's GPU path (A2Q, degree-aware, Degree-Quant) against the CPU for all four layer types."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
from test_methods import ARCHS, model_for, small_graph  # noqa: E402

from quant.qat.api import QuantConfig, quant_penalty, quantize_  # noqa: E402

METHODS = ("a2q", "degree-aware", "dq-int8", "dq-int4")


def _quantized(arch, method, data, device):
    model = model_for(arch, data).double().to(device)
    return quantize_(model, QuantConfig(method=method), data)


def _eval_outputs_and_grads(model, data, device):
    """Eval-mode forward (all nodes quantized, no random masks) and the gradients of loss + memory penalty."""
    model.eval()
    model.zero_grad()
    x, ei, y = data.x.to(device), data.edge_index.to(device), data.y.to(device)
    out = model(x, ei)
    (F.cross_entropy(out, y) + quant_penalty(model)).backward()
    grads = {n: p.grad.detach().cpu() for n, p in model.named_parameters() if p.grad is not None}
    return out.detach().cpu(), grads


def check_state_transfer(arch, method, device):
    data = small_graph()
    data.x = data.x.double()
    source = _quantized(arch, method, data, "cpu")
    source.train()
    F.cross_entropy(source(data.x, data.edge_index), data.y).backward()  # first step: ranges, steps
    target = _quantized(arch, method, data, device)
    target.load_state_dict(source.state_dict())
    want_out, want_grads = _eval_outputs_and_grads(source, data, "cpu")
    got_out, got_grads = _eval_outputs_and_grads(target, data, device)
    assert all(t.device.type == torch.device(device).type for t in [*target.parameters(), *target.buffers()])
    torch.testing.assert_close(got_out, want_out, rtol=1e-9, atol=1e-9)
    learned = any(".q_" in n for n in got_grads)  # the steps (and bits) of A2Q / degree-aware; DQ learns none
    assert got_grads.keys() == want_grads.keys() and learned == (not method.startswith("dq"))
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, rtol=1e-7, atol=1e-9, msg=name)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("arch", ARCHS)
def test_quantized_state_restores_the_model(arch, method):
    check_state_transfer(arch, method, "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("arch", ARCHS)
def test_quantized_model_on_gpu_equals_cpu(arch, method):
    check_state_transfer(arch, method, "cuda")
