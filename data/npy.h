// NPY files, numpy's format for one array (np.save / np.load), versions 1.0, 2.0 and 3.0:
// reading into a Kiln tensor and writing one that numpy reads.
//
// Layout of a file (numpy's NEP 1):
//   bytes [0, 6)     the magic "\x93NUMPY"
//   bytes [6, 8)     the version, major then minor: 1.0, 2.0 or 3.0
//   then             the header's length H: a little-endian uint16 (1.0) or uint32 (2.0, 3.0)
//   then H bytes     the header, a Python dict literal (latin-1; UTF-8 in 3.0), padded with
//                    spaces and a final '\n' so the data starts 64-byte aligned:
//                      {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//   then             the array's bytes: numel items of the descr's size, in C order, or
//                    Fortran order (first index fastest) when fortran_order is True.
//
// Note [NPY dtypes]: descr is a byte order ('<' little, '>' big, '|' not applicable, '='
// native, little here) and a type code with its size. Kiln's own types load as stored
// (f4 f8 f2 i8 i4 u1 b1 -> Float32 Float64 Float16 Int64 Int32 UInt8 Bool); the narrow and
// unsigned integers with no Kiln type widen exactly to the nearest one that holds every
// value (i1 i2 u2 -> Int32, u4 -> Int64); big-endian data is byte-swapped. Anything else
// (u8, complex, strings, objects, records, datetimes) is an error naming it. Bool bytes
// must be 0 or 1.
//
// Note [NPY validation]: the magic and a known version; a header length within the file
// and at most kMaxHeaderBytes (numpy's own reader refuses headers past 10,000 bytes by
// default; ours allows 1 MiB); the dict with exactly the keys descr, fortran_order and
// shape (numpy's rule), in any order, with whitespace and a trailing comma anywhere
// Python allows them and Python 2's long-integer suffix "L" in the shape; at most 64
// dims (numpy's limit), each non-negative; numel times the item size computed with
// overflow checks and equal to the bytes after the header, so nothing is allocated before
// the file is known to hold it. Every violation is a kiln::Error naming the file and the
// problem.
//
// Loads read the array's bytes straight into the new tensor's memory (one copy: the
// file's; big-endian and widened types go through one more pass). A Fortran-order array
// loads as the transposed view numpy's would be: a tensor of the file's shape whose
// strides run first index fastest (t.is_contiguous() is false; t.contiguous() copies).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "core/byte_source.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace kiln::data::npy {

inline constexpr int64_t kMaxHeaderBytes = int64_t{1} << 20;
inline constexpr int64_t kMaxDims = 64;

// What a header says, checked against the file (Note [NPY validation]).
struct Header {
  int major_version = 1;
  int minor_version = 0;
  std::string descr;             // as written: "<f4", "|u1", ">i8"
  DType dtype = DType::Float32;  // what the values load as (Note [NPY dtypes])
  std::vector<int64_t> shape;    // () for a scalar
  bool fortran_order = false;
  int64_t data_offset = 0;      // bytes before the array's
  int64_t stored_itemsize = 0;  // bytes an item takes in the file
  int64_t numel() const;
  int64_t data_bytes() const { return numel() * stored_itemsize; }
};

Header read_header(const std::string& path);
Header read_header_from_bytes(std::span<const uint8_t> bytes, std::string_view name = "<memory>");
Header read_header(const ByteSource& source);

// A CPU tensor of the file's shape and Header::dtype.
Tensor load(const std::string& path);

// Note [Memory-mapped NPY]: with mmap, an array stored as Kiln holds it (little-endian,
// any dtype but bool, whose bytes must be checked; data 64-byte aligned, as numpy writes
// it) is not read at all: the tensor's storage is the file, mapped copy-on-write
// (numpy's mmap_mode="c"), so pages are read as they are first touched, the page cache is
// shared between processes, and writing to the tensor changes private copies of its
// pages, never the file. The header is checked in the mapped bytes themselves. Other
// arrays are read as without it. The file must not shrink while mapped (a read past its
// new end is a SIGBUS, as with numpy's memmap).
struct LoadOptions {
  bool mmap = false;
};
Tensor load(const std::string& path, const LoadOptions& options);
// Whether load(path, {.mmap = true}) maps the file's array rather than reading it.
bool can_map(const Header& header);
Tensor load_from_bytes(std::span<const uint8_t> bytes, std::string_view name = "<memory>");
Tensor load(const ByteSource& source);

// The file's bytes for `tensor` (any device and layout: copied to the host, C order):
// version 1.0 (2.0 when the header outgrows 65535 bytes), header byte-identical to
// numpy's np.save. BFloat16 has no numpy dtype: an error that says to convert first.
std::string to_bytes(const Tensor& tensor);
// Writes to_bytes(tensor) to `path` atomically (Note [Atomic save] in core/atomic_file.h).
SaveStatus save(const Tensor& tensor, const std::string& path);

}  // namespace kiln::data::npy
