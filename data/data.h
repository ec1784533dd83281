// kiln::data in one include: the data pipeline's public headers (so far the NPY reader
// and writer, data/npy.h).
#pragma once

#include "data/npy.h"
