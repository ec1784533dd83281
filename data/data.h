// kiln::data in one include: the data pipeline's public headers (so far the NPY and NPZ
// readers and writers, data/npy.h and data/npz.h, and the zip container, data/zip.h).
#pragma once

#include "data/npy.h"
#include "data/npz.h"
#include "data/zip.h"
