#!/usr/bin/env python3
"""Writes the PyTorch checkpoints of tests/data/test_pth.cpp with torch.save.

checkpoint_zip.pth, checkpoint_legacy.pth: the same object in both formats (zip, and
_use_new_zipfile_serialization=False): {'state_dict': OrderedDict of every storage dtype
(float32/64/16, bfloat16, int64/32/16/8, uint8, bool), a transposed (strided) view, an
offset view, two views of one storage, a Parameter, an empty and a 0-d tensor; 'epoch',
'best_acc', 'arch', 'betas', 'flags'; 'optimizer': {'state': {0: {...}}, 'param_groups':
[...]}} and expected.safetensors, every tensor of it contiguous (int16/int8 as int32).
medicalnet_style.pth: what MedicalNet's 2019 release looks like: legacy format, saved from
a GPU (torch.cuda.FloatStorage, location 'cuda:0': the bytes are rewritten, as this
machine has none), {'state_dict': {'module.conv1.weight': ...}} of a ResNet-50 with the
MedicalNet stem at 1/16 width, conv_seg.0 with its bias as MedicalNet has it.
hostile_os_system.pth (zip) and hostile_eval_legacy.pth (legacy): what a malicious
checkpoint does, an object whose __reduce__ calls os.system / builtins.eval on load.

Needs torch and safetensors (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import builtins
import collections
import os
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "nn", "models"))
from reference_models import ResNet3d  # noqa: E402


def checkpoint():
    g = torch.Generator().manual_seed(20261126)
    sd = collections.OrderedDict()
    sd["f32"] = torch.randn(2, 3, generator=g)
    sd["f64"] = torch.randn(4, generator=g, dtype=torch.float64)
    sd["f16"] = torch.randn(3, generator=g).half()
    sd["bf16"] = torch.randn(2, 2, generator=g).bfloat16()
    sd["i64"] = torch.arange(-2, 3)
    sd["i32"] = torch.tensor([7, -8], dtype=torch.int32)
    sd["i16"] = torch.tensor([300, -301], dtype=torch.int16)
    sd["i8"] = torch.tensor([-5, 6], dtype=torch.int8)
    sd["u8"] = torch.tensor([0, 1, 254, 255], dtype=torch.uint8)
    sd["bool"] = torch.tensor([True, False, True])
    sd["transposed"] = torch.randn(3, 4, generator=g).t()
    base = torch.randn(6, generator=g)
    sd["offset_view"] = base[2:5]
    sd["shared_a"] = base
    sd["shared_b"] = base.view(2, 3)[1]
    sd["parameter"] = torch.nn.Parameter(torch.randn(2, generator=g))
    sd["empty"] = torch.zeros(0, 3)
    sd["scalar"] = torch.tensor(2.5)
    optimizer = {"state": {0: {"step": 3, "exp_avg": torch.randn(2, generator=g)}},
                 "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 1], "amsgrad": False}]}
    return {"state_dict": sd, "epoch": 7, "best_acc": 0.91, "arch": "resnet", "betas": (0.9, 0.999),
            "flags": [True, None], "optimizer": optimizer}


def expected(obj):
    out = {}
    for k, v in obj["state_dict"].items():
        v = v.detach().contiguous().clone()
        if v.dtype in (torch.int16, torch.int8):
            v = v.to(torch.int32)
        out["state_dict." + k] = v
    out["optimizer.state.0.exp_avg"] = obj["optimizer"]["state"][0]["exp_avg"].clone()
    return out


def gpu_saved(raw):
    """The legacy bytes as if saved from a GPU: torch.cuda.<X>Storage at 'cuda:0'."""
    for name in (b"FloatStorage", b"LongStorage"):
        raw = raw.replace(b"ctorch\n" + name + b"\n", b"ctorch.cuda\n" + name + b"\n")
    cpu = b"X\x03\x00\x00\x00cpu"
    assert cpu in raw
    return raw.replace(cpu, b"X\x06\x00\x00\x00cuda:0")


class Hostile:
    def __init__(self, fn, arg):
        self.fn, self.arg = fn, arg

    def __reduce__(self):
        return (self.fn, (self.arg,))


if __name__ == "__main__":
    obj = checkpoint()
    torch.save(obj, "checkpoint_zip.pth")
    torch.save(obj, "checkpoint_legacy.pth", _use_new_zipfile_serialization=False)
    save_file(expected(obj), "expected.safetensors")

    torch.manual_seed(5)
    model = ResNet3d(50, "MedicalNet", segmentation=True, width=4)
    state = collections.OrderedDict()
    for k, v in model.state_dict().items():
        state["module." + k] = v
        if k == "conv_seg.0.weight":  # MedicalNet's ConvTranspose3d has a bias
            state["module.conv_seg.0.bias"] = torch.randn(32)
    torch.save({"state_dict": state}, "medicalnet_style.tmp", _use_new_zipfile_serialization=False)
    with open("medicalnet_style.tmp", "rb") as f:
        raw = gpu_saved(f.read())
    os.remove("medicalnet_style.tmp")
    with open("medicalnet_style.pth", "wb") as f:
        f.write(raw)

    torch.save({"state_dict": {"w": torch.ones(1)}, "payload": Hostile(os.system, "echo pwned")},
               "hostile_os_system.pth")
    torch.save(Hostile(builtins.eval, "__import__('os').system('echo pwned')"), "hostile_eval_legacy.pth",
               _use_new_zipfile_serialization=False)
    print("torch", torch.__version__)
