#!/usr/bin/env python3
"""Writes the PyTorch fixtures of tests/nn/models/test_resnet3d.cpp and test_densenet3d.cpp:
the state-dict names and parameter counts of every ResNet3D depth of both families
(resnet3d_names.json) and of every DenseNet3D depth in MONAI's and torchvision's layouts
(densenet3d_names.json), and the outputs and gradients of ResNet-18 (MedMNIST family),
ResNet-50 (MedicalNet family) and DenseNet-121 (MONAI) 3D for fixed weights and inputs,
in float64 (resnet18_3d, resnet50_3d, densenet121_3d .safetensors).

The reference networks are written here from the architectures of Tencent/MedicalNet's
models/resnet.py, MedMNIST/experiments' MedMNIST3D/models.py (their module names,
strides, dilations and shortcuts) and MONAI's monai/networks/nets/densenet.py (and
torchvision's DenseNet layout), not imported: Kiln's tests need nothing but torch. MedicalNet's
conv_seg ConvTranspose3d is written without its bias, as Kiln builds it (Note [conv_seg's
bias] in nn/models/resnet3d.h), so the names here are MedicalNet's less that one key.

Weights: every parameter is a formula both sides compute (fill_formula below), so the
fixtures hold no weights. For the k-th parameter in named_parameters order, element i,
u = sqrt(3) (2 integer_hash(i, k) - 1), a hash with mean 0 and variance 1 that looks
uniform (integer arithmetic: both sides get the same bits); the weight is sqrt(2 / fan_in) u for >= 2-d
tensors (Kaiming's variance), 1 + 0.1 u for norm weights and 0.1 u for biases.
The input is random (stored); the loss is sum(output * output_weights), output_weights
stored. The ResNets run in training mode (batch statistics, running statistics updated);
DenseNet-121 in eval mode: at 32^3 its last block sees 1^3 maps, whose batch statistics
over a batch of 2 make float32 meaningless (the tests check its training mode against its
memory-efficient mode instead). The script prints how far PyTorch's own float32 run is from its float64 one: the
float32 tolerance the tests use is a small multiple of it.

Needs torch, numpy and safetensors (a virtual environment; Kiln's build never depends on
them). Run from this folder: python3 make_fixtures.py
"""
import copy
import json
import math

from collections import OrderedDict

import torch
import torch.nn as nn
from safetensors.torch import save_file

BLOCKS = {10: (1, 1, 1, 1), 18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3),
          152: (3, 8, 36, 3), 200: (3, 24, 36, 3)}


def conv(i, o, k, stride=1, dilation=1):
    return nn.Conv3d(i, o, k, stride=stride, padding=dilation * (k // 2), dilation=dilation, bias=False)


class ZeroPad(nn.Module):  # type-A shortcut: subsample, append zero channels (gradient kept)
    def __init__(self, stride, out):
        super().__init__()
        self.stride, self.out = stride, out

    def forward(self, x):
        y = x[:, :, ::self.stride, ::self.stride, ::self.stride]
        pad = y.new_zeros((y.shape[0], self.out - y.shape[1]) + tuple(y.shape[2:]))
        return torch.cat([y, pad], 1)


class Block(nn.Module):
    def __init__(self, bottleneck, i, planes, stride, dilation, shortcut_name, shortcut_type):
        super().__init__()
        self.bottleneck = bottleneck
        out = planes * (4 if bottleneck else 1)
        if bottleneck:
            self.conv1, self.bn1 = conv(i, planes, 1), nn.BatchNorm3d(planes)
            self.conv2, self.bn2 = conv(planes, planes, 3, stride, dilation), nn.BatchNorm3d(planes)
            self.conv3, self.bn3 = conv(planes, out, 1), nn.BatchNorm3d(out)
        else:
            self.conv1, self.bn1 = conv(i, planes, 3, stride, dilation), nn.BatchNorm3d(planes)
            self.conv2, self.bn2 = conv(planes, planes, 3, 1, dilation), nn.BatchNorm3d(planes)
        self.shortcut_name = None
        if stride != 1 or i != out:
            self.shortcut_name = shortcut_name
            module = (nn.Sequential(conv(i, out, 1, stride), nn.BatchNorm3d(out)) if shortcut_type == "B"
                      else ZeroPad(stride, out))
            setattr(self, shortcut_name, module)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        if self.bottleneck:
            y = torch.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
        else:
            y = self.bn2(self.conv2(y))
        s = getattr(self, self.shortcut_name)(x) if self.shortcut_name else x
        return torch.relu(y + s)


class ResNet3d(nn.Module):
    def __init__(self, depth, family, in_channels=1, classes=2, shortcut_type="B", segmentation=False,
                 dilated=None):
        super().__init__()
        medicalnet = family == "MedicalNet"
        bottleneck = depth >= 50
        if dilated is None:
            dilated = medicalnet and segmentation
        stages = [(1, 1), (2, 1), (1, 2), (1, 4)] if dilated else [(1, 1), (2, 1), (2, 1), (2, 1)]
        self.conv1 = conv(in_channels, 64, 7 if medicalnet else 3, 2 if medicalnet else 1)
        self.bn1 = nn.BatchNorm3d(64)
        self.maxpool = nn.MaxPool3d(3, 2, 1) if medicalnet else None
        width, shortcut_name = 64, "downsample" if medicalnet else "shortcut"
        for n, (blocks, (stride, dilation)) in enumerate(zip(BLOCKS[depth], stages)):
            planes = 64 << n
            layer = []
            for b in range(blocks):
                layer.append(Block(bottleneck, width, planes, stride if b == 0 else 1, dilation, shortcut_name,
                                   shortcut_type))
                width = planes * (4 if bottleneck else 1)
            setattr(self, f"layer{n + 1}", nn.Sequential(*layer))
        self.segmentation = segmentation
        if segmentation:
            self.conv_seg = nn.Sequential(
                nn.ConvTranspose3d(width, 32, 2, stride=2, bias=False), nn.BatchNorm3d(32), nn.ReLU(),
                conv(32, 32, 3), nn.BatchNorm3d(32), nn.ReLU(), conv(32, classes, 1))
        else:
            self.avgpool = nn.AdaptiveAvgPool3d(1)
            setattr(self, "fc" if medicalnet else "linear", nn.Linear(width, classes))
            self.head = "fc" if medicalnet else "linear"

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        if self.maxpool is not None:
            y = self.maxpool(y)
        for n in range(1, 5):
            y = getattr(self, f"layer{n}")(y)
        if self.segmentation:
            return self.conv_seg(y)
        return getattr(self, self.head)(self.avgpool(y).flatten(1))


def integer_hash(n, k):
    """n values in [0, 1) that look uniform, from exact integer arithmetic (no product
    reaches 2^63), so C++ computes the same bits."""
    h = (torch.arange(n, dtype=torch.int64) * 2654435761 + k * 97531) % 2**32
    h = h ^ (h >> 15)
    h = (h * 1103515245) % 2**32
    h = h ^ (h >> 13)
    return h.double() / 2**32


class DenseLayer(nn.Module):
    def __init__(self, cin, growth, bn_size, monai):
        super().__init__()
        mods = [("norm1", nn.BatchNorm3d(cin)), ("relu1", nn.ReLU()),
                ("conv1", nn.Conv3d(cin, bn_size * growth, 1, bias=False)),
                ("norm2", nn.BatchNorm3d(bn_size * growth)), ("relu2", nn.ReLU()),
                ("conv2", nn.Conv3d(bn_size * growth, growth, 3, padding=1, bias=False))]
        self.monai = monai
        if monai:
            self.layers = nn.Sequential(OrderedDict(mods))
        else:
            for name, m in mods:
                self.add_module(name, m)

    def forward(self, x):
        body = self.layers if self.monai else nn.Sequential(*self.children())
        return torch.cat([x, body(x)], 1)


class DenseNet3d(nn.Module):
    """MONAI's DenseNet layout (monai=True) or torchvision's, with the standard stem."""

    def __init__(self, blocks, monai=True, in_channels=1, classes=2, init=64, growth=32, bn_size=4):
        super().__init__()
        f = OrderedDict([("conv0", nn.Conv3d(in_channels, init, 7, 2, 3, bias=False)), ("norm0", nn.BatchNorm3d(init)),
                         ("relu0", nn.ReLU()), ("pool0", nn.MaxPool3d(3, 2, 1))])
        c = init
        for i, n in enumerate(blocks):
            f[f"denseblock{i + 1}"] = nn.Sequential(OrderedDict(
                (f"denselayer{j + 1}", DenseLayer(c + j * growth, growth, bn_size, monai)) for j in range(n)))
            c += n * growth
            if i + 1 == len(blocks):
                f["norm5"] = nn.BatchNorm3d(c)
            else:
                f[f"transition{i + 1}"] = nn.Sequential(OrderedDict([
                    ("norm", nn.BatchNorm3d(c)), ("relu", nn.ReLU()), ("conv", nn.Conv3d(c, c // 2, 1, bias=False)),
                    ("pool", nn.AvgPool3d(2, 2))]))
                c //= 2
        self.features = nn.Sequential(f)
        self.monai = monai
        if monai:
            self.class_layers = nn.Sequential(OrderedDict([("relu", nn.ReLU()), ("pool", nn.AdaptiveAvgPool3d(1)),
                                                           ("flatten", nn.Flatten(1)), ("out", nn.Linear(c, classes))]))
        else:
            self.classifier = nn.Linear(c, classes)

    def forward(self, x):
        y = self.features(x)
        if self.monai:
            return self.class_layers(y)
        return self.classifier(torch.relu(y).mean((2, 3, 4)))


DENSE_BLOCKS = {121: (6, 12, 24, 16), 169: (6, 12, 32, 32), 201: (6, 12, 48, 32), 264: (6, 12, 64, 48)}


def fill_formula(model):
    """The weights of the module docstring, in place."""
    with torch.no_grad():
        for k, (name, p) in enumerate(model.named_parameters()):
            wave = (math.sqrt(3.0) * (2.0 * integer_hash(p.numel(), k) - 1.0)).reshape(p.shape)
            if p.dim() >= 2:
                fan_in = p.shape[1] * math.prod(p.shape[2:])
                p.copy_(math.sqrt(2.0 / fan_in) * wave)
            elif name.endswith("weight"):
                p.copy_(1 + 0.1 * wave)
            else:
                p.copy_(0.1 * wave)


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
