#!/usr/bin/env python3
"""Writes the PyTorch fixtures of tests/nn/models/test_resnet3d.cpp and test_densenet3d.cpp:
the state-dict names and parameter counts of every ResNet3D depth of both families
(resnet3d_names.json) and of every DenseNet3D depth in MONAI's and torchvision's layouts
(densenet3d_names.json), and the outputs and gradients of ResNet-18 (MedMNIST family),
ResNet-50 (MedicalNet family) and DenseNet-121 (MONAI) 3D for fixed weights and inputs,
in float64 (resnet18_3d, resnet50_3d, densenet121_3d .safetensors).

The reference networks (reference_models.py) are written from the architectures of
Tencent/MedicalNet's models/resnet.py, MedMNIST/experiments' MedMNIST3D/models.py (their
module names, strides, dilations and shortcuts) and MONAI's monai/networks/nets/
densenet.py (and torchvision's DenseNet layout), not imported from those projects.
MedicalNet's conv_seg ConvTranspose3d is written without its bias, as Kiln builds it
(Note [conv_seg's bias] in nn/models/resnet3d.h), so the names are MedicalNet's less that
one key.

Weights: every parameter is a formula both sides compute (fill_formula), so the
fixtures hold no weights. For the k-th parameter in named_parameters order, element i,
u = sqrt(3) (2 integer_hash(i, k) - 1), a hash with mean 0 and variance 1 that looks
uniform (integer arithmetic: both sides get the same bits); the weight is sqrt(2 / fan_in)
u for >= 2-d tensors (Kaiming's variance), 1 + 0.1 u for norm weights, 0.1 u for biases.
The input is random (stored); the loss is sum(output * output_weights), output_weights
stored. The ResNets run in training mode (batch statistics, running statistics updated);
DenseNet-121 in eval mode: at 32^3 its last block sees 1^3 maps, whose batch statistics
over a batch of 2 make float32 meaningless (the tests check its training mode against its
memory-efficient mode instead). The script prints how far PyTorch's own float32 run is
from its float64 one: the float32 tolerance the tests use is a small multiple of it.

Needs torch, numpy and safetensors (a virtual environment; Kiln's build never depends on
them). Run from this folder: python3 make_fixtures.py
"""
import copy
import json

import torch
from safetensors.torch import save_file

from reference_models import BLOCKS, DENSE_BLOCKS, DenseNet3d, ResNet3d, fill_formula

def float32_error(model, x, w, y, grad_input):
    """PyTorch's own float32 run against its float64 one: the error float32 itself makes
    on this network, which bounds the tolerance Kiln's float32 run can be held to."""
    model32 = copy.deepcopy(model).float().train(model.training)
    model32.zero_grad()
    x32 = x.detach().float().requires_grad_(True)
    y32 = model32(x32)
    (y32 * w.float()).sum().backward()
    rel = lambda a, b: ((a.double() - b).norm() / b.norm()).item()
    return rel(y32, y), rel(x32.grad, grad_input)


def run_fixture(model, input_shape, path, full_grads, training=True):
    model = model.double().train(training)
    fill_formula(model)
    g = torch.Generator().manual_seed(20261126)
    x = torch.randn(input_shape, dtype=torch.float64, generator=g).requires_grad_(True)
    initial = copy.deepcopy(model)
    y = model(x)
    w = torch.randn(y.shape, dtype=torch.float64, generator=g)
    (y * w).sum().backward()
    errors = float32_error(initial, x, w, y, x.grad)
    print(path, "PyTorch float32 vs float64, output and input gradient:", errors)
    out = {"input": x.detach(), "output": y.detach(), "output_weights": w, "grad_input": x.grad}
    names = [n for n, _ in model.named_parameters()]
    out["grad_norms"] = torch.stack([p.grad.norm() for _, p in model.named_parameters()])
    out["grad_sums"] = torch.stack([p.grad.sum() for _, p in model.named_parameters()])
    parameters = dict(model.named_parameters())
    for n in full_grads:
        if n in parameters:
            out["grad." + n] = parameters[n].grad
    # Running statistics after one training step's forward.
    for n, b in model.named_buffers():
        if n in full_grads:
            out["buffer." + n] = b
    save_file({k: v.contiguous() for k, v in out.items()}, path,
              metadata={"parameters": json.dumps(names), "float32_output_error": repr(errors[0]),
                        "float32_grad_input_error": repr(errors[1]), "training": str(training).lower()})


if __name__ == "__main__":
    torch.manual_seed(0)
    names = {}
    for family in ("MedMNIST", "MedicalNet"):
        for depth in BLOCKS:
            for shortcut in ("A", "B") if depth in (18, 50) else ("B",):
                seg = family == "MedicalNet"
                model = ResNet3d(depth, family, shortcut_type=shortcut, segmentation=seg)
                names[f"{family}-{depth}-{shortcut}"] = {
                    "state_dict": list(model.state_dict().keys()),
                    "parameters": sum(p.numel() for p in model.parameters()),
                }
    names["MedicalNet-50-B-classification"] = {
        "state_dict": list(ResNet3d(50, "MedicalNet").state_dict().keys()),
        "parameters": sum(p.numel() for p in ResNet3d(50, "MedicalNet").parameters()),
    }
    dense_names = {}
    for depth, blocks in DENSE_BLOCKS.items():
        for layout in ("MONAI", "torchvision"):
            model = DenseNet3d(blocks, monai=layout == "MONAI")
            dense_names[f"{layout}-{depth}"] = {
                "state_dict": list(model.state_dict().keys()),
                "parameters": sum(p.numel() for p in model.parameters()),
            }
            print("DenseNet", layout, depth, dense_names[f"{layout}-{depth}"]["parameters"])
    with open("densenet3d_names.json", "w") as f:
        json.dump(dense_names, f, separators=(",", ":"))
    with open("resnet3d_names.json", "w") as f:
        json.dump(names, f, separators=(",", ":"))
    for key in ("MedMNIST-18-B", "MedMNIST-34-B", "MedMNIST-50-B", "MedicalNet-18-B", "MedicalNet-50-B"):
        print(key, names[key]["parameters"])
    run_fixture(ResNet3d(18, "MedMNIST"), (2, 1, 16, 16, 16), "resnet18_3d.safetensors",
                ["conv1.weight", "layer2.0.shortcut.0.weight", "linear.weight", "linear.bias", "bn1.running_mean"])
    run_fixture(ResNet3d(50, "MedicalNet", dilated=True), (2, 1, 24, 24, 24), "resnet50_3d.safetensors",
                ["conv1.weight", "layer1.0.downsample.0.weight", "fc.weight", "layer4.2.bn3.weight",
                 "layer4.2.bn3.running_var"])
    run_fixture(DenseNet3d(DENSE_BLOCKS[121]), (2, 1, 32, 32, 32), "densenet121_3d.safetensors",
                ["features.conv0.weight", "features.norm5.weight",
                 "class_layers.out.weight"], training=False)
    print("torch", torch.__version__)
