// Process-wide numerics switches, set once by the user (as torch.backends.* in PyTorch).
//
// Note [TF32]: on Ampere and later GPUs, float32 matrix products can run on tensor cores
// in TF32 (10-bit mantissa inputs, float32 accumulation): about 8x the float32 rate, with
// relative errors near 1e-3 instead of 1e-6. Like PyTorch since 1.12, Kiln keeps it off
// by default, so float32 means float32; a user who wants the speed switches it on.
// Convolutions have their own switch, as in PyTorch (torch.backends.cudnn.allow_tf32),
// but unlike PyTorch's it is off by default too, for the same reason: a float32 conv on
// the GPU agrees with the CPU to float32 rounding unless the user asks otherwise. It
// selects cuDNN's math type (CUDNN_DEFAULT_MATH with it, CUDNN_FMA_MATH without), which is
// part of the algorithm cache's key (kernels/cuda/cudnn/conv_algorithm_cache.h).
#pragma once

namespace kiln {

// float32 matmul/bmm/linear may use TF32 tensor cores (off by default).
void set_allow_tf32_matmul(bool allow);
bool allow_tf32_matmul();

// float32 convolutions (cuDNN) may use TF32 tensor cores (off by default).
void set_allow_tf32_conv(bool allow);
bool allow_tf32_conv();

// CPU float32 (and float16/bfloat16, computed in float32) convolutions run on oneDNN
// where the build has it (on by default, as torch.backends.mkldnn.enabled); off, they
// take the vol2col + Eigen reference path (Note [oneDNN convolutions] in
// kernels/cpu/conv_onednn.h). `kiln info` tells whether this build has oneDNN at all.
void set_onednn_enabled(bool enabled);
bool onednn_enabled();

}  // namespace kiln
