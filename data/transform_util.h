// What the transforms' source files (and the NIfTI reader's reorientation) share, not
// part of the public API: a uniform draw from the sample's generator, a sample's tensor
// checked to be a [C, D, H, W] volume, and a flip along one dim.
#pragma once

#include <string>

#include "core/generator.h"
#include "data/dataset.h"

namespace kiln::data {

// One value of U[low, high) from `generator`.
double uniform(Generator& generator, double low, double high);

// The tensor `key` of the sample, which a spatial transform needs as [C, D, H, W]; an
// error naming the transform when it is missing or of another rank.
Tensor& volume(Sample& sample, const std::string& key, const std::string& transform);

// `t` reversed along `dim` (a new tensor: index_select with n-1 .. 0).
Tensor flip(const Tensor& t, int64_t dim);

}  // namespace kiln::data
