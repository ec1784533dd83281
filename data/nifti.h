// NIfTI-1 and NIfTI-2 volumes (.nii, .nii.gz): medical scans with their geometry, read
// through the NIfTI reference library (nifti_clib, Debian's libnifti2-dev), not a parser
// of our own; and written (NIfTI-1, the header built by the library, the file saved
// atomically).
//
//   const data::nifti::Volume scan = data::nifti::read("ct.nii.gz", {.reorient_to_ras = true});
//   scan.data      // [C, X, Y, Z] float32, scl_slope/scl_inter applied; C = the 4th dim (1 for 3D)
//   scan.header    // dims, spacing, the voxel-to-world affine and its source, orientation
//   data::nifti::write("out.nii.gz", scan.data, {.affine = scan.header.affine});
//
// Layout: NIfTI stores i (x) fastest. Voxel (i, j, k) of channel c is data[c][i][j][k],
// so the tensor's spatial axes 0, 1, 2 are the file's i, j, k, and its dims 1-3 the
// [C, D, H, W] of Kiln's transforms.
//
// Note [NIfTI validation]: nifti_clib trusts a header's sizes and allocates what it
// claims, and even copies dim[1..dim[0]] into an array of 8 without looking at dim[0]
// (fuzz_nifti crashed it so). So Kiln first reads the header's bytes itself (through
// zlib for .gz): sizeof_hdr 348 or 540 (either byte order), the NIfTI magic, dim[0] in 1
// to 7 and each size >= 1. Only then does the library read the header, which is checked
// before any voxel is:
// dims 1 to 7 with at most 4 used (x, y, z, channels), each >= 1, a datatype we can
// convert, nvox * bytes per voxel computed with overflow checks, and those bytes present:
// past vox_offset in a .nii, and for a .nii.gz no more than 1032 times the compressed
// size (deflate's largest ratio, the zip reader's bomb limit). A data section that ends
// early is a truncated file. An ANALYZE 7.5 header (no NIfTI magic) is refused. A
// non-finite scl_slope means no scaling and a non-finite scl_inter 0 (nifti_clib resets
// them so); a non-finite affine is an error. Every failure is a kiln::Error naming the file; the
// header alone (read_header) is checked the same way.
//
// Note [Non-finite NIfTI voxels]: NaN and infinite float voxels are read as 0, as the
// reference library reads them (its loader zeroes them, and nibabel users rely on masks
// exported as NaN reading as background). Kiln reads the voxel bytes itself (zlib from
// the header's offset, swapped to this machine's order), so it counts them:
// Volume::non_finite_zeroed, and load_volume (data/volume_file.h) says so once per file
// (core/warning.h) instead of letting a NaN mask vanish without a word.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/tensor.h"

namespace kiln::data::nifti {

struct Header {
  int version = 1;                // 1 or 2
  std::vector<int64_t> dims;      // nx, ny, nz (and nt for 4D); trailing 1s dropped to 3
  std::string datatype;           // as stored: "uint8", "int16", "float32", ...
  std::array<double, 3> spacing;  // pixdim of x, y, z
  std::string spatial_units;      // "mm", "um", "m" or "unknown"
  double scl_slope = 0;           // 0 (also when non-finite in the file): no scaling
  double scl_inter = 0;
  // Voxel (i, j, k, 1) to world (x, y, z, 1): the sform when its code is set, else the
  // qform, else the spacing alone (the standard's fallback); affine_source says which.
  std::array<std::array<double, 4>, 4> affine{};
  std::string affine_source;  // "sform", "qform" or "spacing"
  std::string orientation;    // where i, j, k point, e.g. "RAS" or "LPS" (closest axes)
  std::string description;    // descrip
};

struct ReadOptions {
  bool keep_dtype = false;       // the stored type (nearest Kiln dtype), no scaling
  bool reorient_to_ras = false;  // permute and flip axes to the closest RAS+ orientation
};

struct Volume {
  Tensor data;  // [C, X, Y, Z]
  Header header;
  int64_t non_finite_zeroed = 0;  // NaN and infinite float voxels read as 0 (Note [Non-finite NIfTI voxels])
};

// The header alone (Note [NIfTI validation] applies; no voxel is read).
Header read_header(const std::string& path);

// The volume: float32 with scl_slope/scl_inter applied (a slope of 0 means none), or, with
// keep_dtype, the stored type widened to the nearest Kiln dtype (int8/int16/uint16 ->
// int32, uint32 -> int64). With reorient_to_ras, the axes are permuted and flipped so i,
// j, k point to the right, anterior and superior (nibabel's as_closest_canonical) and
// the header's affine and orientation follow.
Volume read(const std::string& path, ReadOptions options = {});

// The permutation and flips that bring an affine's voxel axes closest to RAS+:
// axis[i] = the world axis voxel axis i runs along, flip[i] = whether it runs backwards
// (nibabel's io_orientation: the affine's closest rotation, then greedily per voxel
// axis). An affine whose 3x3 part is singular is an error.
struct Orientation {
  std::array<int, 3> axis;
  std::array<bool, 3> flip;
};
Orientation orientation_of(const std::array<std::array<double, 4>, 4>& affine);

struct WriteOptions {
  // Voxel (i, j, k, 1) to world (x, y, z, 1), stored as the sform and the qform (code 1,
  // scanner anatomical); the spacing (pixdim) is its columns' lengths, in mm.
  std::array<std::array<double, 4>, 4> affine{{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}};
  std::string description = "";  // descrip: at most 79 bytes
};

// Writes `data`, [X, Y, Z] or [C, X, Y, Z] (C in the 4th dim, as read() reads it), as a
// NIfTI-1 file: .nii, or .nii.gz (gzip). Stored as uint8, int32, int64, float32 or float64
// as the dtype is (Bool as uint8, float16 and bfloat16 as float32), without scaling. The
// file is written atomically (core/atomic_file.h); errors name it.
SaveStatus write(const std::string& path, const Tensor& data, const WriteOptions& options = {});

}  // namespace kiln::data::nifti
