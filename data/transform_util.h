// What the transforms' source files (and the NIfTI reader's reorientation) share, not
// part of the public API: a uniform draw from the sample's generator, a sample's tensor
// checked to be a [C, D, H, W] volume, a flip along one dim, and a box cropped out.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/generator.h"
#include "data/dataset.h"

namespace kiln::data {

// One value of U[low, high) from `generator`.
double uniform(Generator& generator, double low, double high);

// The tensor `key` of the sample, which a spatial transform needs as [C, D, H, W]; an
// error naming the transform when it is missing or of another rank.
Tensor& volume(Sample& sample, const std::string& key, const std::string& transform);

// `t` reversed along `dim` (a new tensor: index_select with n-1 .. 0, made on t's device).
Tensor flip(const Tensor& t, int64_t dim);

// The [C, size...] box of the volume `t` starting at `start` (contiguous).
Tensor crop(const Tensor& t, const std::array<int64_t, 3>& start, const std::array<int64_t, 3>& size);
// An error naming `transform` and `key` unless a box of `size` fits in the volume `t`.
void check_fits(const Tensor& t, const std::array<int64_t, 3>& size, const std::string& transform,
                const std::string& key);

}  // namespace kiln::data
