// kiln::data in one include: the data pipeline's public headers: the NPY and NPZ readers
// and writers (data/npy.h, data/npz.h, over the zip container data/zip.h), the NIfTI
// reader and writer (data/nifti.h), datasets (data/dataset.h; MedMNIST 3D in
// data/medmnist.h, written out as NIfTI scans by data/medmnist_export.h; folders and CSV
// manifests of one's own files in data/folder_dataset.h, data/scan_list.h and
// data/scan_dataset.h), 3D transforms
// (data/transforms.h, resampling in data/resample.h), samplers (data/sampler.h), the
// DataLoader (data/loader.h) and its DevicePrefetcher (data/prefetcher.h), synthetic
// volumes (data/synthetic.h), downloads (data/download.h) and MD5 (data/md5.h).
#pragma once

#include "data/csv.h"
#include "data/dataset.h"
#include "data/download.h"
#include "data/folder_dataset.h"
#include "data/loader.h"
#include "data/md5.h"
#include "data/medmnist.h"
#include "data/medmnist_export.h"
#include "data/nifti.h"
#include "data/npy.h"
#include "data/npz.h"
#include "data/pickle.h"
#include "data/pth.h"
#include "data/prefetcher.h"
#include "data/resample.h"
#include "data/sampler.h"
#include "data/scan_dataset.h"
#include "data/scan_list.h"
#include "data/synthetic.h"
#include "data/transforms.h"
#include "data/volume_file.h"
#include "data/zip.h"
