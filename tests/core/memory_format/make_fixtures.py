#!/usr/bin/env python3
"""Writes the PyTorch fixture of tests/core/test_memory_format.cpp: memory_format.npz.

For each case <name> (a tensor PyTorch made by the recipe below; only its sizes and
strides are kept):
  "<name>_sizes", "<name>_strides"  the tensor's, in elements
  "<name>_facts"  [is_contiguous(), is_contiguous(channels_last) (4-d, else 0),
                   is_contiguous(channels_last_3d) (5-d, else 0),
                   suggest_memory_format: 0 contiguous, 1 channels_last, 2 channels_last_3d]
  "<name>_cl_strides"  (4-d and 5-d cases) the strides of
                   x.contiguous(memory_format=channels_last or channels_last_3d)
  "<name>_exp_strides", "<name>_clone_strides", "<name>_double_strides"  the strides of
                   torch.exp(x), x.clone() and x.to(torch.float64) (layouts kept)
and for each pair of operands in PAIRS, their sizes and strides and torch.add's result's
strides ("pair_<name>_..."). suggest_memory_format is torch._prims_common's, PyTorch's
Python statement of c10's rule.

Needs torch and numpy (a virtual environment; Kiln's build never depends on them).
Run from this folder: python3 make_fixtures.py
"""
import numpy as np
import torch
from torch._prims_common import suggest_memory_format

cl3d = torch.channels_last_3d
cl = torch.channels_last


def strided(sizes, strides):
    return torch.empty(4096).as_strided(sizes, strides)


CASES = {
    "contiguous_5d": lambda: torch.empty(2, 3, 4, 5, 6),
    "channels_last_5d": lambda: torch.empty(2, 3, 4, 5, 6).contiguous(memory_format=cl3d),
    "contiguous_4d": lambda: torch.empty(2, 3, 4, 5),
    "channels_last_4d": lambda: torch.empty(2, 3, 4, 5).contiguous(memory_format=cl),
    "one_channel_5d": lambda: torch.empty(2, 1, 4, 5, 6),
    "one_channel_channels_last_5d": lambda: torch.empty(2, 1, 4, 5, 6).contiguous(memory_format=cl3d),
    "one_voxel_5d": lambda: torch.empty(2, 3, 1, 1, 1),
    "one_voxel_channels_last_5d": lambda: torch.empty(2, 3, 1, 1, 1).contiguous(memory_format=cl3d),
    "batch_of_one_channels_last_5d": lambda: torch.empty(1, 3, 4, 5, 6).contiguous(memory_format=cl3d),
    "sliced_depth_channels_last_5d": lambda: torch.empty(2, 3, 4, 5, 6).contiguous(memory_format=cl3d)[:, :, ::2],
    "sliced_channels_channels_last_5d": lambda: torch.empty(2, 3, 4, 5, 6).contiguous(memory_format=cl3d)[:, 1:],
    "transposed_5d": lambda: torch.empty(2, 3, 4, 5, 6).transpose(2, 4),
    "permuted_ndhwc_5d": lambda: torch.empty(2, 4, 5, 6, 3).permute(0, 4, 1, 2, 3),
    "permuted_nchwd_5d": lambda: torch.empty(2, 3, 5, 6, 4).permute(0, 1, 4, 2, 3),
    "broadcast_channel_5d": lambda: torch.empty(2, 1, 4, 5, 6).expand(2, 3, 4, 5, 6),
    "empty_batch_5d": lambda: torch.empty(0, 3, 4, 5, 6),
    "empty_batch_channels_last_5d": lambda: torch.empty(0, 3, 4, 5, 6).contiguous(memory_format=cl3d),
    "empty_channels_5d": lambda: torch.empty(2, 0, 4, 5, 6),
    "n111_contiguous_4d": lambda: torch.empty(4, 1, 1, 1),
    "n111_equal_strides_4d": lambda: strided((4, 1, 1, 1), (1, 1, 1, 1)),
    "n11w_sliced_4d": lambda: torch.empty(4, 1, 1, 7)[..., :1],
    "n1h1_channels_last_4d": lambda: strided((2, 1, 5, 1), (5, 1, 1, 1)),
    "n1h1_contiguous_4d": lambda: strided((2, 1, 5, 1), (5, 5, 1, 1)),
    "transposed_1c1w_4d": lambda: torch.empty(1, 3, 1, 5).transpose(1, 3),
    "overlapping_5d": lambda: strided((2, 3, 4, 5, 6), (3, 1, 0, 0, 0)),
    "rank_3": lambda: torch.empty(2, 3, 4),
    "rank_3_transposed": lambda: torch.empty(2, 3, 4).transpose(0, 2),
    "rank_6": lambda: torch.empty(2, 3, 2, 2, 2, 2),
    "transposed_then_sliced_2d": lambda: torch.empty(6, 8).t()[::2],
    "permuted_then_sliced_5d": lambda: torch.empty(2, 3, 4, 5, 6).permute(0, 3, 1, 4, 2)[:, ::2],
    "channels_last_sliced_transposed_5d": lambda: torch.empty(2, 3, 4, 5, 6).contiguous(
        memory_format=cl3d)[:, :, 1:].transpose(3, 4),
}

FORMAT_INDEX = {torch.contiguous_format: 0, cl: 1, cl3d: 2}

# Elementwise results' layouts: for each pair <name>, "pair_<name>_{a,b}_{sizes,strides}"
# (the operands) and "pair_<name>_add_strides" (torch.add(a, b).stride()). For every
# layout case above, "<name>_exp_strides" (torch.exp) and "<name>_clone_strides"
# (clone(), preserve_format) and "<name>_double_strides" (.to(torch.float64)).
c5 = lambda: torch.empty(2, 3, 4, 5, 6)
l5 = lambda: torch.empty(2, 3, 4, 5, 6).contiguous(memory_format=cl3d)
l4 = lambda: torch.empty(2, 3, 4, 5).contiguous(memory_format=cl)
PAIRS = {
    "channels_last_both": lambda: (l5(), l5()),
    "channels_last_then_contiguous": lambda: (l5(), c5()),
    "contiguous_then_channels_last": lambda: (c5(), l5()),
    "channels_last_plus_bias": lambda: (l5(), torch.empty(1, 3, 1, 1, 1)),
    "bias_plus_channels_last": lambda: (torch.empty(3, 1, 1, 1), l5()),
    "channels_last_plus_scalar": lambda: (l5(), torch.tensor(2.0)),
    "transposed_plus_contiguous": lambda: (c5().transpose(2, 4), torch.empty(2, 3, 6, 5, 4)),
    "sliced_channels_last_both": lambda: (l5()[:, :, ::2], l5()[:, :, 1::2]),
    "channels_last_4d_both": lambda: (l4(), l4()),
    "channels_last_4d_plus_bias": lambda: (l4(), torch.empty(3, 1, 1)),
    "matrix_transposed_plus_matrix": lambda: (torch.empty(4, 3).t(), torch.empty(3, 4)),
    "matrix_transposed_plus_row": lambda: (torch.empty(4, 3).t(), torch.empty(4)),
    "one_channel_channels_last_both": lambda: (torch.empty(2, 1, 4, 5, 6).contiguous(memory_format=cl3d),) * 2,
    "batch_of_one_channels_last_plus_contiguous": lambda: (
        torch.empty(1, 3, 4, 5, 6).contiguous(memory_format=cl3d), torch.empty(1, 3, 4, 5, 6)),
    "broadcast_channel_plus_channels_last": lambda: (torch.empty(2, 1, 4, 5, 6).expand(2, 3, 4, 5, 6), l5()),
}


def layout_of(arrays, key, t):
    arrays[key + "_sizes"] = np.array(t.shape, dtype=np.int64)
    arrays[key + "_strides"] = np.array(t.stride(), dtype=np.int64)

if __name__ == "__main__":
    arrays = {}
    for name, make in CASES.items():
        x = make()
        facts = [
            int(x.is_contiguous()),
            int(x.dim() == 4 and x.is_contiguous(memory_format=cl)),
            int(x.dim() == 5 and x.is_contiguous(memory_format=cl3d)),
            FORMAT_INDEX[suggest_memory_format(x)],
        ]
        arrays[name + "_sizes"] = np.array(x.shape, dtype=np.int64)
        arrays[name + "_strides"] = np.array(x.stride(), dtype=np.int64)
        arrays[name + "_facts"] = np.array(facts, dtype=np.int64)
        if x.dim() in (4, 5):
            y = x.contiguous(memory_format=cl if x.dim() == 4 else cl3d)
            arrays[name + "_cl_strides"] = np.array(y.stride(), dtype=np.int64)
        arrays[name + "_exp_strides"] = np.array(torch.exp(x).stride(), dtype=np.int64)
        arrays[name + "_clone_strides"] = np.array(x.clone().stride(), dtype=np.int64)
        arrays[name + "_double_strides"] = np.array(x.to(torch.float64).stride(), dtype=np.int64)
    for name, make in PAIRS.items():
        a, b = make()
        layout_of(arrays, f"pair_{name}_a", a)
        layout_of(arrays, f"pair_{name}_b", b)
        arrays[f"pair_{name}_add_strides"] = np.array(torch.add(a, b).stride(), dtype=np.int64)
    np.savez("memory_format.npz", **arrays)
    print(f"memory_format.npz: {len(CASES)} layouts, {len(PAIRS)} pairs")
