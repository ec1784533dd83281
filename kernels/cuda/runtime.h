// The CUDA runtime as Kiln sees it so far: how many GPUs can be used, and if none, why.
// Never throws and never crashes without a driver or a GPU (DESIGN.md: no GPU = CUDA not
// available). The CUDA backend issue builds the device runtime around this.
#pragma once

#include <string>

namespace kiln::cuda {

// Number of usable CUDA devices; 0 with `reason` set when there are none.
int device_count(std::string* reason);

}  // namespace kiln::cuda
