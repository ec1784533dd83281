// Reductions over any set of dims, with keepdim: sum, mean, amax/amin, max/min (values
// and indices), argmax/argmin, var/std (Welford), norm (p = 1, 2, inf or any p > 0),
// logsumexp, and all/any.
//
// `dims` empty means every dim; negative dims wrap; naming a dim twice is an error. sum of
// integers or bool gives int64 (as PyTorch); mean, var, std and norm need floating inputs.
// Floating sums accumulate in double on the CPU, so float32 sums of millions of values
// keep float32 accuracy. Empty reductions: sum 0, mean/var NaN, norm 0, logsumexp -inf,
// all true, any false; max/min/argmax/argmin (and norm with p = inf) of an empty slice are
// errors. NaN: max/min propagate it; argmax/argmin return the first NaN's index; ties go
// to the first index.
// Gradients: sum broadcasts g back; mean divides by the count; amax/amin/max/min split g
// evenly among tied extrema (amax) or give it to the returned index (max with dim);
// var/std/norm use their closed forms (0 where std or the norm is 0); logsumexp is
// composed from max, exp, sum and log (its gradient is softmax * g).
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "core/tensor.h"

namespace kiln {

Tensor sum(const Tensor& x, Dims dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, Dims dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, Dims dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, Dims dims = {}, bool keepdim = false);
Tensor max(const Tensor& x);  // over everything, 0-d
Tensor min(const Tensor& x);
// (values, indices) of the first extremum along dim.
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
// Over the flattened tensor when dim is absent.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// correction 1 = unbiased (Bessel), 0 = population.
Tensor var(const Tensor& x, Dims dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, Dims dims = {}, int64_t correction = 1, bool keepdim = false);
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, Dims dims = {},
                                    int64_t correction = 1, bool keepdim = false);
// p-norm: p = 1, 2, any p > 0, or INFINITY for max |x|.
Tensor norm(const Tensor& x, double p = 2.0, Dims dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, Dims dims, bool keepdim = false);
// Bool results: whether all / any element is nonzero.
Tensor all(const Tensor& x);
Tensor any(const Tensor& x);

}  // namespace kiln
