// NIfTI volumes (nifti.h) through nifti_clib: the header read alone and checked (Note
// [NIfTI validation]), then the voxels loaded into the library's buffer and converted
// into a tensor; the orientation computed from the affine as nibabel does.
#include "data/nifti.h"

#include <nifti2_io.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/ops.h"
#include "data/deflate.h"
#include "data/transform_util.h"  // flip
#include "data/zip.h"             // kMaxDeflateRatio

namespace kiln::data::nifti {
namespace {

struct ImageDeleter {
  void operator()(nifti_image* image) const { nifti_image_free(image); }
};
using Image = std::unique_ptr<nifti_image, ImageDeleter>;

// How a stored datatype becomes a Kiln tensor: the dtype it is read as (kept) and its
// name; unsupported types (complex, RGB, 128-bit floats, uint64) have none.
struct StoredType {
  int code;
  const char* name;
  DType kept;
  int bytes;
};
constexpr StoredType kStoredTypes[] = {
    {DT_UINT8, "uint8", DType::UInt8, 1},       {DT_INT8, "int8", DType::Int32, 1},
    {DT_INT16, "int16", DType::Int32, 2},       {DT_UINT16, "uint16", DType::Int32, 2},
    {DT_INT32, "int32", DType::Int32, 4},       {DT_UINT32, "uint32", DType::Int64, 4},
    {DT_INT64, "int64", DType::Int64, 8},       {DT_FLOAT32, "float32", DType::Float32, 4},
    {DT_FLOAT64, "float64", DType::Float64, 8},
};

const StoredType* stored_type(int code) {
  for (const StoredType& t : kStoredTypes) {
    if (t.code == code) return &t;
  }
  return nullptr;
}

// The library prints its own diagnostics on stderr; Kiln's errors say what went wrong.
void quiet_library() {
  static const bool once = [] {
    nifti_set_debug_level(0);
    return true;
  }();
  (void)once;
}

std::string units_name(int code) {
  switch (code) {
    case NIFTI_UNITS_MM:
      return "mm";
    case NIFTI_UNITS_MICRON:
      return "um";
    case NIFTI_UNITS_METER:
      return "m";
    default:
      return "unknown";
  }
}

using Matrix3 = std::array<std::array<double, 3>, 3>;

std::optional<Matrix3> inverse(const Matrix3& m) {
  const double det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                     m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                     m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  if (!std::isfinite(det) || std::abs(det) < 1e-12) return std::nullopt;
  Matrix3 inv{};
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = 0; j < 3; ++j) {
      // Cofactor of m[j][i] (the adjugate is the cofactors' transpose).
      const size_t r0 = (j + 1) % 3, r1 = (j + 2) % 3, c0 = (i + 1) % 3, c1 = (i + 2) % 3;
      inv[i][j] = (m[r0][c0] * m[r1][c1] - m[r0][c1] * m[r1][c0]) / det;
    }
  }
  return inv;
}

// A file-named error: every message of this reader starts with the path.
template <typename... Args>
[[noreturn]] void fail(const std::string& path, const Args&... args) {
  throw Error(detail::str_cat("NIfTI file '", path, "': ", args...));
}

struct Opened {
  Image image;
  int version;  // 1 or 2
};

// Up to `bytes` bytes of the file from `offset` into `into` (decompressed when gzip'd:
// zlib's gzread passes plain files through); returns how many there were.
int64_t read_bytes_at(const std::string& path, int64_t offset, void* into, int64_t bytes) {
  const std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (file == nullptr || gzseek(file.get(), static_cast<z_off_t>(offset), SEEK_SET) != static_cast<z_off_t>(offset))
    return 0;
  int64_t done = 0;
  while (done < bytes) {
    const auto chunk = static_cast<unsigned>(std::min<int64_t>(bytes - done, int64_t{1} << 30));
    const int n = gzread(file.get(), static_cast<char*>(into) + done, chunk);
    if (n <= 0) break;
    done += n;
  }
  return done;
}

// The first bytes of the file, at most `limit`.
std::string leading_bytes(const std::string& path, size_t limit) {
  std::string bytes(limit, '\0');
  bytes.resize(static_cast<size_t>(read_bytes_at(path, 0, bytes.data(), static_cast<int64_t>(limit))));
  return bytes;
}

template <typename T>
T field(const std::string& bytes, size_t offset, bool swap) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  if (swap) {
    auto* b = reinterpret_cast<unsigned char*>(&value);
    std::reverse(b, b + sizeof(T));
  }
  return value;
}

// The header's version (1 or 2) from its own bytes, with the fields nifti_clib trusts
// checked first: it copies dim[1..dim[0]] into an array of 8 without looking at dim[0]
// (found by fuzz_nifti: dim[0] = 65536 overflows nifti_convert_n2hdr2nim's stack).
int probe_version(const std::string& path) {
  const std::string bytes = leading_bytes(path, 544);
  if (bytes.size() < 348) fail(path, "is not a readable NIfTI-1 or NIfTI-2 file (bad or truncated header)");
  int version = 0;
  bool swap = false;
  for (const bool swapped : {false, true}) {
    const auto size = field<int32_t>(bytes, 0, swapped);
    if (size == 348 || size == 540) {
      version = size == 348 ? 1 : 2;
      swap = swapped;
    }
  }
  if (version == 0 || (version == 2 && bytes.size() < 540)) {
    fail(path, "is not a readable NIfTI-1 or NIfTI-2 file (bad or truncated header)");
  }
  if (version == 1 ? bytes.compare(344, 3, "ni1") == 0 : bytes.compare(4, 3, "ni2") == 0) {
    fail(path, "is the header of a two-file NIfTI (.hdr + .img); Kiln reads single .nii or .nii.gz files");
  }
  const bool magic = version == 1 ? bytes.compare(344, 3, "n+1") == 0 : bytes.compare(4, 3, "n+2") == 0;
  if (!magic && version == 1)
    fail(path, "has an ANALYZE 7.5 header (no NIfTI magic 'n+1' or 'n+2'), not a NIfTI one");
  if (!magic) fail(path, "is not a readable NIfTI-1 or NIfTI-2 file (bad magic)");
  const int64_t ndim = version == 1 ? field<int16_t>(bytes, 40, swap) : field<int64_t>(bytes, 16, swap);
  if (ndim < 1 || ndim > 7) fail(path, "has ", ndim, " dimensions (1 to 7 allowed)");
  for (int64_t d = 1; d <= ndim; ++d) {
    const int64_t size = version == 1 ? field<int16_t>(bytes, 40 + 2 * static_cast<size_t>(d), swap)
                                      : field<int64_t>(bytes, 16 + 8 * static_cast<size_t>(d), swap);
    if (size < 1) fail(path, "has size ", size, " along dimension ", d);
  }
  // The voxels start after the header and the 4 extension bytes of a single file (nifti_clib
  // would move a smaller offset there itself and read other bytes than the file's writer
  // meant; nibabel refuses it).
  const double vox_offset = version == 1 ? static_cast<double>(field<float>(bytes, 108, swap))
                                         : static_cast<double>(field<int64_t>(bytes, 168, swap));
  const double least = version == 1 ? 352 : 544;
  if (!std::isfinite(vox_offset) || vox_offset < least || vox_offset > 1e15)
    fail(path, "has vox_offset ", vox_offset, "; a single-file NIfTI-", version, "'s voxels start at byte ", least,
         " or later");
  return version;
}

// The header, read alone and checked (Note [NIfTI validation]).
Opened open_checked(const std::string& path) {
  quiet_library();
  // nifti_clib picks its own file from a name (x.img -> x.hdr, x -> x.nii or x.nii.gz):
  // only names it reads as they are get through, so the file checked is the file read.
  if (!path.ends_with(".nii") && !path.ends_with(".nii.gz")) fail(path, "is not named .nii or .nii.gz");
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot be read: ", ec.message());
  const int version = probe_version(path);
  Image image(nifti_image_read(path.c_str(), /*read_data=*/0));
  if (!image) fail(path, "is not a readable NIfTI-1 or NIfTI-2 file (bad or truncated header)");
  const nifti_image& h = *image;
  if (h.dim[0] < 1 || h.dim[0] > 7) fail(path, "has ", h.dim[0], " dimensions (1 to 7 allowed)");
  int64_t voxels = 1;
  for (int d = 1; d <= h.dim[0]; ++d) {
    if (h.dim[d] < 1) fail(path, "has size ", h.dim[d], " along dimension ", d);
    if (d > 4 && h.dim[d] != 1)
      fail(path, "has ", h.dim[0], " dimensions; Kiln reads up to 4 (x, y, z, channels)");
    const std::optional<int64_t> product = checked_mul(voxels, h.dim[d]);
    if (!product) fail(path, "claims more voxels than fit 64 bits");
    voxels = *product;
  }
  const StoredType* type = stored_type(h.datatype);
  if (type == nullptr) {
    fail(path, "stores datatype ", h.datatype, " (", nifti_datatype_string(h.datatype),
         "); Kiln reads uint8, int8, int16, uint16, int32, uint32, int64, float32 and float64");
  }
  const std::optional<int64_t> bytes = checked_mul(voxels, type->bytes);
  if (!bytes) fail(path, "claims more voxel bytes than fit 64 bits");
  const auto size = static_cast<int64_t>(file_size);
  if (nifti_is_gzfile(path.c_str())) {
    if (*bytes / zip::kMaxDeflateRatio > size) {
      fail(path, "claims ", *bytes, " bytes of voxels, more than ", zip::kMaxDeflateRatio,
           " times its compressed size (", size, " bytes): corrupt, or a decompression bomb");
    }
  } else if (h.iname_offset < 0 || h.iname_offset > size || *bytes > size - h.iname_offset) {
    fail(path, "is truncated: its header claims ", *bytes, " bytes of voxels from offset ", h.iname_offset,
         ", the file has ", size, " bytes");
  }
  return {std::move(image), version};
}

std::array<std::array<double, 4>, 4> to_array(const nifti_dmat44& m) {
  std::array<std::array<double, 4>, 4> a{};
  for (size_t i = 0; i < 4; ++i) {
    for (size_t j = 0; j < 4; ++j) a[i][j] = m.m[i][j];
  }
  return a;
}

std::string orientation_letters(const Orientation& o) {
  static constexpr char kLetters[3][2] = {{'R', 'L'}, {'A', 'P'}, {'S', 'I'}};
  std::string s;
  for (size_t i = 0; i < 3; ++i) s += kLetters[o.axis[i]][o.flip[i] ? 1 : 0];
  return s;
}

Header header_of(const nifti_image& h, int version, const std::string& path) {
  Header header;
  header.version = version;
  for (int d = 1; d <= h.dim[0]; ++d) header.dims.push_back(h.dim[d]);
  while (header.dims.size() > 3 && header.dims.back() == 1) header.dims.pop_back();
  while (header.dims.size() < 3) header.dims.push_back(1);
  header.datatype = stored_type(h.datatype)->name;
  header.spacing = {h.dx, h.dy, h.dz};
  header.spatial_units = units_name(h.xyz_units);
  header.scl_slope = h.scl_slope;
  header.scl_inter = h.scl_inter;
  if (h.sform_code > 0) {
    header.affine = to_array(h.sto_xyz);
    header.affine_source = "sform";
  } else {
    header.affine = to_array(h.qto_xyz);  // the library's qform, or the spacing when code 0
    header.affine_source = h.qform_code > 0 ? "qform" : "spacing";
  }
  for (const auto& row : header.affine) {
    for (double v : row) {
      if (!std::isfinite(v)) fail(path, "has a non-finite ", header.affine_source, " affine");
    }
  }
  // A degenerate affine (a 2-D image's zero spacing along k, say) has no orientation; the
  // volume still reads, and only reorienting it is an error.
  try {
    header.orientation = orientation_letters(orientation_of(header.affine));
  } catch (const Error&) {
    header.orientation = "unknown";
  }
  header.description = std::string(h.descrip, strnlen(h.descrip, sizeof(h.descrip)));
  return header;
}

// The library's voxel buffer as [C, X, Y, Z]: i fastest in the file, so a view with
// strides (xyz, 1, x, xy) of a tensor holding the bytes, then made contiguous.
Tensor voxels_of(const nifti_image& h, const Header& header) {
  const StoredType& type = *stored_type(h.datatype);
  const int64_t nx = header.dims[0], ny = header.dims[1], nz = header.dims[2];
  const int64_t channels = header.dims.size() > 3 ? header.dims[3] : 1;
  const int64_t voxels = nx * ny * nz * channels;
  // The stored values, each widened to the kept dtype.
  Tensor flat = empty({voxels}, {.dtype = type.kept});
  const auto widen = [&]<typename Stored, typename Kept>() {
    const auto* in = static_cast<const Stored*>(h.data);
    Kept* out = static_cast<Kept*>(flat.data_ptr());
    for (int64_t v = 0; v < voxels; ++v) out[v] = static_cast<Kept>(in[v]);
  };
  switch (h.datatype) {
    case DT_UINT8:
      widen.template operator()<uint8_t, uint8_t>();
      break;
    case DT_INT8:
      widen.template operator()<int8_t, int32_t>();
      break;
    case DT_INT16:
      widen.template operator()<int16_t, int32_t>();
      break;
    case DT_UINT16:
      widen.template operator()<uint16_t, int32_t>();
      break;
    case DT_INT32:
      widen.template operator()<int32_t, int32_t>();
      break;
    case DT_UINT32:
      widen.template operator()<uint32_t, int64_t>();
      break;
    case DT_INT64:
      widen.template operator()<int64_t, int64_t>();
      break;
    case DT_FLOAT32:
      widen.template operator()<float, float>();
      break;
    case DT_FLOAT64:
      widen.template operator()<double, double>();
      break;
    default:
      KILN_ASSERT(false, "nifti: unchecked datatype ", h.datatype);
  }
  return flat.as_strided({channels, nx, ny, nz}, {nx * ny * nz, 1, nx, nx * ny}, 0).contiguous();
}

// `data` and `header` brought to the closest RAS+ orientation.
void reorient(Tensor& data, Header& header, const std::string& path) {
  Orientation o{};
  try {
    o = orientation_of(header.affine);
  } catch (const Error& e) {
    fail(path, "cannot be reoriented to RAS: ", e.what());
  }
  // New axis w is the old axis i that runs along world axis w.
  std::array<int64_t, 3> old_of{};
  for (int i = 0; i < 3; ++i) old_of[static_cast<size_t>(o.axis[static_cast<size_t>(i)])] = i;
  Tensor t = data;
  for (int i = 0; i < 3; ++i) {
    if (o.flip[static_cast<size_t>(i)]) t = flip(t, i + 1);
  }
  data = t.permute({0, old_of[0] + 1, old_of[1] + 1, old_of[2] + 1}).contiguous();
  // new index -> old index: old_i = flip_i ? n_i - 1 - new_{axis_i} : new_{axis_i}.
  std::array<std::array<double, 4>, 4> to_old{};
  to_old[3][3] = 1;
  for (size_t i = 0; i < 3; ++i) {
    const auto w = static_cast<size_t>(o.axis[i]);
    to_old[i][w] = o.flip[i] ? -1.0 : 1.0;
    to_old[i][3] = o.flip[i] ? static_cast<double>(header.dims[i] - 1) : 0.0;
  }
  std::array<std::array<double, 4>, 4> affine{};
  for (size_t r = 0; r < 4; ++r) {
    for (size_t c = 0; c < 4; ++c) {
      for (size_t k = 0; k < 4; ++k) affine[r][c] += header.affine[r][k] * to_old[k][c];
    }
  }
  std::vector<int64_t> dims = header.dims;
  std::array<double, 3> spacing{};
  for (size_t w = 0; w < 3; ++w) {
    dims[w] = header.dims[static_cast<size_t>(old_of[w])];
    spacing[w] = header.spacing[static_cast<size_t>(old_of[w])];
  }
  header.affine = affine;
  header.dims = dims;
  header.spacing = spacing;
  // RAS by construction: axis w now runs along world axis w, forwards. (Recomputing it
  // from the new affine could name another axis where two directions tie, since the
  // greedy choice depends on the order the axes are visited in.)
  header.orientation = "RAS";
}

}  // namespace

Orientation orientation_of(const std::array<std::array<double, 4>, 4>& affine) {
  // The 3x3 part with unit columns, then its closest rotation (the orthogonal polar
  // factor, by Newton's iteration X <- (X + X^-T) / 2).
  Matrix3 x{};
  for (size_t c = 0; c < 3; ++c) {
    const double norm = std::hypot(affine[0][c], affine[1][c], affine[2][c]);
    // (Voxels under a femtometre are not a geometry but a corrupt header: their few
    // significant bits, denormals, would steer the orientation at random.)
    KILN_CHECK(norm > 1e-12 && std::isfinite(norm), "the affine's voxel axis ", c,
               " has no direction (length ", norm, ")");
    for (size_t r = 0; r < 3; ++r) x[r][c] = affine[r][c] / norm;
  }
  for (int iteration = 0; iteration < 50; ++iteration) {
    const std::optional<Matrix3> inv = inverse(x);
    KILN_CHECK(inv.has_value(), "the affine's 3x3 part is singular: its voxel axes do not span space");
    double change = 0;
    for (size_t r = 0; r < 3; ++r) {
      for (size_t c = 0; c < 3; ++c) {
        const double next = (x[r][c] + (*inv)[c][r]) / 2;
        change = std::max(change, std::abs(next - x[r][c]));
        x[r][c] = next;
      }
    }
    if (change < 1e-14) break;
  }
  // Greedily per voxel axis: the world axis it runs closest to, then that world axis is taken.
  Orientation o{};
  for (size_t i = 0; i < 3; ++i) {
    size_t best = 0;
    for (size_t w = 1; w < 3; ++w) {
      if (std::abs(x[w][i]) > std::abs(x[best][i])) best = w;
    }
    o.axis[i] = static_cast<int>(best);
    o.flip[i] = x[best][i] < 0;
    for (size_t c = 0; c < 3; ++c) x[best][c] = 0;
  }
  return o;
}

Header read_header(const std::string& path) {
  const Opened opened = open_checked(path);
  return header_of(*opened.image, opened.version, path);
}

namespace {

// Note [Non-finite NIfTI voxels]: NaN and infinite floats become 0, and are counted.
template <typename Float>
int64_t zero_non_finite(void* data, int64_t count) {
  auto* values = static_cast<Float*>(data);
  int64_t zeroed = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) {
      values[i] = 0;
      ++zeroed;
    }
  }
  return zeroed;
}

// The voxel bytes into h.data (freed by nifti_image_unload), in this machine's byte order,
// read with zlib (which passes a plain .nii through) from the header's offset; returns
// how many non-finite floats were set to 0.
int64_t load_voxels(nifti_image& h, const std::string& path) {
  const std::optional<int64_t> bytes = checked_mul(h.nvox, static_cast<int64_t>(h.nbyper));
  if (!bytes) fail(path, "claims more voxel bytes than fit 64 bits");
  h.data = std::malloc(static_cast<size_t>(std::max<int64_t>(*bytes, 1)));
  if (h.data == nullptr) fail(path, "needs ", *bytes, " bytes for its voxels, more than could be allocated");
  if (read_bytes_at(path, h.iname_offset, h.data, *bytes) != *bytes)
    fail(path, "is truncated or corrupt: its voxel data could not be read in full");
  if (h.swapsize > 1 && h.byteorder != nifti_short_order()) nifti_swap_Nbytes(h.nvox, h.swapsize, h.data);
  if (h.datatype == DT_FLOAT32) return zero_non_finite<float>(h.data, h.nvox);
  if (h.datatype == DT_FLOAT64) return zero_non_finite<double>(h.data, h.nvox);
  return 0;
}

}  // namespace

Volume read(const std::string& path, ReadOptions options) {
  const Opened opened = open_checked(path);
  const Image& image = opened.image;
  Volume volume{.data = Tensor(), .header = header_of(*image, opened.version, path)};
  volume.non_finite_zeroed = load_voxels(*image, path);
  volume.data = voxels_of(*image, volume.header);
  nifti_image_unload(image.get());
  if (!options.keep_dtype) {
    volume.data = volume.data.to(DType::Float32);
    if (image->scl_slope != 0 && (image->scl_slope != 1 || image->scl_inter != 0)) {
      volume.data = add(mul(volume.data, image->scl_slope), image->scl_inter);
    }
  }
  if (options.reorient_to_ras) reorient(volume.data, volume.header, path);
  return volume;
}

// ---- writing -------------------------------------------------------------------------------

namespace {

// The stored type of a tensor written as it is (floating types Kiln computes in but NIfTI
// does not store as float32).
std::pair<int, DType> written_type(DType dtype) {
  switch (dtype) {
    case DType::UInt8:
    case DType::Bool: return {DT_UINT8, DType::UInt8};
    case DType::Int32: return {DT_INT32, DType::Int32};
    case DType::Int64: return {DT_INT64, DType::Int64};
    case DType::Float64: return {DT_FLOAT64, DType::Float64};
    default: return {DT_FLOAT32, DType::Float32};
  }
}

// The 348-byte NIfTI-1 header, built by the library from an image description.
std::string header_bytes(const std::string& path, const std::vector<int64_t>& sizes, int datatype,
                         const WriteOptions& options) {
  std::array<int64_t, 8> dims{static_cast<int64_t>(sizes.size()), 1, 1, 1, 1, 1, 1, 1};
  for (size_t d = 0; d < sizes.size(); ++d) dims[d + 1] = sizes[d];
  const Image image(nifti_make_new_nim(dims.data(), datatype, 0));
  KILN_CHECK(image != nullptr, "nifti::write ", path, ": the library could not describe the image");
  nifti_dmat44 affine{};
  for (size_t r = 0; r < 4; ++r) {
    for (size_t c = 0; c < 4; ++c) {
      KILN_CHECK(std::isfinite(options.affine[r][c]), "nifti::write ", path, ": the affine is not finite");
      affine.m[r][c] = options.affine[r][c];
    }
  }
  double spacing[3];
  for (size_t c = 0; c < 3; ++c) {
    spacing[c] = std::hypot(options.affine[0][c], options.affine[1][c], options.affine[2][c]);
    KILN_CHECK(spacing[c] > 0, "nifti::write ", path, ": the affine's voxel axis ", c, " has length 0");
  }
  image->dx = image->pixdim[1] = spacing[0];
  image->dy = image->pixdim[2] = spacing[1];
  image->dz = image->pixdim[3] = spacing[2];
  image->xyz_units = NIFTI_UNITS_MM;
  image->sform_code = image->qform_code = NIFTI_XFORM_SCANNER_ANAT;
  image->sto_xyz = affine;
  nifti_dmat44_to_quatern(affine, &image->quatern_b, &image->quatern_c, &image->quatern_d, &image->qoffset_x,
                          &image->qoffset_y, &image->qoffset_z, nullptr, nullptr, nullptr, &image->qfac);
  image->nifti_type = NIFTI_FTYPE_NIFTI1_1;
  image->iname_offset = 352;  // the header and the 4 bytes saying no extensions follow
  std::snprintf(image->descrip, sizeof image->descrip, "%s", options.description.c_str());
  nifti_1_header header{};
  KILN_CHECK(nifti_convert_nim2n1hdr(image.get(), &header) == 0, "nifti::write ", path,
             ": the image does not fit a NIfTI-1 header (a size above 32767?)");
  std::string bytes(reinterpret_cast<const char*>(&header), sizeof header);
  bytes.append(4, '\0');
  return bytes;
}

}  // namespace

SaveStatus write(const std::string& path, const Tensor& data, const WriteOptions& options) {
  KILN_CHECK(path.ends_with(".nii") || path.ends_with(".nii.gz"), "nifti::write ", path,
             ": the file must end in .nii or .nii.gz");
  KILN_CHECK(data.dim() == 3 || data.dim() == 4, "nifti::write ", path,
             ": a volume is [X, Y, Z] or [C, X, Y, Z], got shape ", data.sizes());
  const Tensor volume = data.dim() == 3 ? data.unsqueeze(0) : data;
  for (const int64_t size : volume.sizes())
    KILN_CHECK(size >= 1 && size <= 32767, "nifti::write ", path, ": NIfTI-1 sizes are 1 to 32767, got ", volume.sizes());
  const auto [datatype, stored] = written_type(volume.dtype());
  std::vector<int64_t> sizes = {volume.size(1), volume.size(2), volume.size(3)};
  if (volume.size(0) > 1) sizes.push_back(volume.size(0));
  std::string bytes = header_bytes(path, sizes, datatype, options);
  // i fastest in the file: [C, X, Y, Z] as [C, Z, Y, X] in memory.
  const Tensor ordered = volume.to(Device::cpu(), stored).permute({0, 3, 2, 1}).contiguous();
  bytes.append(static_cast<const char*>(ordered.data_ptr()), static_cast<size_t>(ordered.numel()) * itemsize(stored));
  if (path.ends_with(".gz")) bytes = deflated(bytes, DeflateWrapper::Gzip);
  return save_atomically(bytes, path, "nifti::write");
}

}  // namespace kiln::data::nifti
