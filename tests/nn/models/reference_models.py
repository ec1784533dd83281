"""PyTorch versions of Kiln's bundled 3D models, written from the reference code's
architectures and names (Tencent/MedicalNet models/resnet.py, MedMNIST/experiments'
MedMNIST3D/models.py, MONAI's monai/networks/nets/densenet.py and torchvision's DenseNet
layout), for the fixtures (make_fixtures.py) and for the side-by-side training-step
benchmark (bench/train_step/train_step_pytorch.py). Needs torch only.
"""
import math
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.utils.checkpoint

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
                 dilated=None, width=64):
        super().__init__()
        medicalnet = family == "MedicalNet"
        bottleneck = depth >= 50
        if dilated is None:
            dilated = medicalnet and segmentation
        stages = [(1, 1), (2, 1), (1, 2), (1, 4)] if dilated else [(1, 1), (2, 1), (2, 1), (2, 1)]
        self.conv1 = conv(in_channels, width, 7 if medicalnet else 3, 2 if medicalnet else 1)
        self.bn1 = nn.BatchNorm3d(width)
        self.maxpool = nn.MaxPool3d(3, 2, 1) if medicalnet else None
        base, shortcut_name = width, "downsample" if medicalnet else "shortcut"
        for n, (blocks, (stride, dilation)) in enumerate(zip(BLOCKS[depth], stages)):
            planes = base << n
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
    """MONAI's _DenseLayer (modules under `layers`) or torchvision's (directly on the layer).
    Called with the block's feature maps so far, as torchvision's memory-efficient
    DenseNet: with memory_efficient, "concatenate, norm1, relu1, conv1, norm2, relu2" runs
    under torch.utils.checkpoint (the PyTorch equivalent of Kiln's memory-efficient mode)."""

    def __init__(self, cin, growth, bn_size, monai, memory_efficient=False):
        super().__init__()
        mods = [("norm1", nn.BatchNorm3d(cin)), ("relu1", nn.ReLU()),
                ("conv1", nn.Conv3d(cin, bn_size * growth, 1, bias=False)),
                ("norm2", nn.BatchNorm3d(bn_size * growth)), ("relu2", nn.ReLU()),
                ("conv2", nn.Conv3d(bn_size * growth, growth, 3, padding=1, bias=False))]
        self.monai, self.memory_efficient = monai, memory_efficient
        if monai:
            self.layers = nn.Sequential(OrderedDict(mods))
        else:
            for name, m in mods:
                self.add_module(name, m)

    def module(self, name):
        return getattr(self.layers, name) if self.monai else getattr(self, name)

    def bottleneck(self, *features):
        """Everything up to conv2's input: what the memory-efficient mode recomputes (Kiln's
        Note [Memory-efficient DenseNet]; torchvision's checkpoint stops at conv1)."""
        b = self.module("conv1")(self.module("relu1")(self.module("norm1")(torch.cat(features, 1))))
        return self.module("relu2")(self.module("norm2")(b))

    def forward(self, features):
        if self.memory_efficient and torch.is_grad_enabled():
            b = torch.utils.checkpoint.checkpoint(self.bottleneck, *features, use_reentrant=False)
        else:
            b = self.bottleneck(*features)
        return self.module("conv2")(b)


class DenseBlock(nn.ModuleDict):
    def forward(self, x):
        features = [x]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class DenseNet3d(nn.Module):
    """MONAI's DenseNet layout (monai=True) or torchvision's, with the standard stem."""

    def __init__(self, blocks, monai=True, in_channels=1, classes=2, init=64, growth=32, bn_size=4,
                 memory_efficient=False, small_input=False):
        super().__init__()
        if small_input:  # Kiln's DenseNet3dStem::SmallInput: 3x3x3 stride 1, no pool, for 28^3
            f = OrderedDict([("conv0", nn.Conv3d(in_channels, init, 3, 1, 1, bias=False)),
                             ("norm0", nn.BatchNorm3d(init)), ("relu0", nn.ReLU())])
        else:
            f = OrderedDict([("conv0", nn.Conv3d(in_channels, init, 7, 2, 3, bias=False)),
                             ("norm0", nn.BatchNorm3d(init)), ("relu0", nn.ReLU()), ("pool0", nn.MaxPool3d(3, 2, 1))])
        c = init
        for i, n in enumerate(blocks):
            f[f"denseblock{i + 1}"] = DenseBlock(OrderedDict(
                (f"denselayer{j + 1}", DenseLayer(c + j * growth, growth, bn_size, monai, memory_efficient))
                for j in range(n)))
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
