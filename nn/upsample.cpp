// Upsample: kiln::interpolate with the layer's options; the options are checked when the
// layer is made, not at its first forward.
#include "nn/upsample.h"

#include <sstream>

#include "core/error.h"

namespace kiln::nn {

Upsample::Upsample(const UpsampleOptions& options) : options_(options) {
  KILN_CHECK(options.size.empty() != options.scale_factor.empty(),
             "Upsample: give exactly one of size and scale_factor");
  KILN_CHECK(!options.align_corners || options.mode == InterpolateMode::Linear,
             "Upsample: align_corners applies to linear modes only");
}

Tensor Upsample::forward(const Tensor& input) { return interpolate(input, options_); }

std::string Upsample::extra_repr() const {
  std::ostringstream os;
  if (!options_.size.empty()) {
    os << "size=" << shape_str(options_.size);
  } else {
    os << "scale_factor=(";
    for (size_t i = 0; i < options_.scale_factor.size(); ++i) os << (i ? ", " : "") << options_.scale_factor[i];
    os << ")";
  }
  const char* mode = options_.mode == InterpolateMode::Linear         ? "linear"
                     : options_.mode == InterpolateMode::NearestExact ? "nearest-exact"
                                                                      : "nearest";
  os << ", mode='" << mode << "'";
  if (options_.align_corners) os << ", align_corners=True";
  return os.str();
}

}  // namespace kiln::nn
