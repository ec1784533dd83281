// Process-wide numerics switches, set once by the user (as torch.backends.* in PyTorch).
//
// Note [TF32]: on Ampere and later GPUs, float32 matrix products can run on tensor cores
// in TF32 (10-bit mantissa inputs, float32 accumulation): about 8x the float32 rate, with
// relative errors near 1e-3 instead of 1e-6. Like PyTorch since 1.12, Kiln keeps it off
// by default, so float32 means float32; a user who wants the speed switches it on.
#pragma once

namespace kiln {

// float32 matmul/bmm/linear may use TF32 tensor cores (off by default).
void set_allow_tf32_matmul(bool allow);
bool allow_tf32_matmul();

}  // namespace kiln
