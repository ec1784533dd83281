// `kiln inspect FILE`: reads only the header of a safetensors file
// (safetensors::read_header, which validates it fully) and prints its metadata (the
// tensors' checksums as a count), every
// tensor sorted by name with dtype, shape and bytes, and the totals; or, for a file named
// *.npy, its NPY header (data::npy::read_header): version, stored dtype and what it loads
// as, shape, memory order and bytes; for *.npz, each array's header (npz::File::arrays,
// which inflates only the headers); for *.nii and *.nii.gz, the NIfTI header
// (data::nifti::read_header, checked without reading the voxels): version, datatype,
// dims, spacing, scaling, the affine with its source and the orientation; for *.pth, *.pt
// and *.ckpt, a PyTorch checkpoint (data::pth::load, which runs none of its code): its
// format, every tensor by path with dtype, shape and bytes, and its other entries.
#include <algorithm>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "tools/cli.h"

namespace kiln::tools {
namespace {

// Names and metadata print as they are, unless they hold control characters: then as a
// quoted JSON string, so the table stays one line per tensor.
std::string printable(const std::string& text) {
  const bool plain = std::none_of(text.begin(), text.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (plain && !text.empty()) return text;
  std::string quoted;
  json::append_quoted(quoted, text);
  return quoted;
}

std::string shape_text(const std::vector<int64_t>& shape) { return shape_str(shape); }

// Columns are measured in code points (UTF-8 lead bytes), not bytes, so "embé" lines up.
size_t display_width(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}
std::string pad_right(const std::string& text, size_t width) {
  return text + std::string(width - std::min(width, display_width(text)), ' ');
}
std::string pad_left(const std::string& text, size_t width) {
  return std::string(width - std::min(width, display_width(text)), ' ') + text;
}

}  // namespace

std::string format_inspect(const std::string& path, const safetensors::Header& header) {
  std::ostringstream os;
  os << path << ": " << header.file_bytes << " bytes (header " << header.header_bytes << " bytes)\n";
  if (!header.metadata.empty()) {
    os << "metadata:\n";
    for (const auto& [key, value] : header.metadata) {
      // Note [Tensor checksums]: a count, not a line of hex digits.
      const std::string shown = key == safetensors::kChecksumKey
                                    ? "a CRC-32C for each of the " + std::to_string(header.tensors.size()) +
                                          " tensors, checked when the file is loaded"
                                    : printable(value);
      os << "  " << printable(key) << " = " << shown << "\n";
    }
  }
  std::vector<const safetensors::TensorInfo*> tensors;
  for (const auto& info : header.tensors) tensors.push_back(&info);
  std::sort(tensors.begin(), tensors.end(), [](auto* a, auto* b) { return a->name < b->name; });

  size_t name_width = 4, dtype_width = 5, shape_width = 5, bytes_width = 5;
  for (const auto* info : tensors) {
    name_width = std::max(name_width, display_width(printable(info->name)));
    dtype_width = std::max(dtype_width, info->dtype.size());
    shape_width = std::max(shape_width, shape_text(info->shape).size());
    bytes_width = std::max(bytes_width, std::to_string(info->nbytes()).size());
  }
  const auto row = [&](const std::string& name, const std::string& dtype, const std::string& shape,
                       const std::string& bytes) {
    os << "  " << pad_right(name, name_width) << "  " << pad_right(dtype, dtype_width) << "  "
       << pad_right(shape, shape_width) << "  " << pad_left(bytes, bytes_width) << "\n";
  };
  if (!tensors.empty()) {
    os << "tensors:\n";
    row("name", "dtype", "shape", "bytes");
  }
  int64_t parameters = 0, bytes = 0;
  for (const auto* info : tensors) {
    row(printable(info->name), info->dtype, shape_text(info->shape), std::to_string(info->nbytes()));
    parameters += info->numel();
    bytes += info->nbytes();
  }
  os << "total: " << tensors.size() << (tensors.size() == 1 ? " tensor, " : " tensors, ") << parameters
     << (parameters == 1 ? " parameter, " : " parameters, ") << bytes << " bytes of data ("
     << human_bytes(bytes) << ")\n";
  return os.str();
}

std::string format_inspect(const std::string& path, const data::npy::Header& header) {
  std::ostringstream os;
  os << path << ": NPY " << header.major_version << "." << header.minor_version << ", " << header.data_offset
     << " bytes of header and " << header.data_bytes() << " of data (" << human_bytes(header.data_bytes()) << ")\n"
     << "  dtype " << header.descr << " (loads as " << dtype_name(header.dtype) << "), shape "
     << shape_text(header.shape) << ", " << header.numel() << (header.numel() == 1 ? " element, " : " elements, ")
     << (header.fortran_order ? "Fortran" : "C") << " order\n";
  return os.str();
}

std::string format_inspect(const std::string& path, const std::vector<data::npz::Array>& arrays) {
  std::ostringstream os;
  os << path << ": NPZ, " << arrays.size() << (arrays.size() == 1 ? " array\n" : " arrays\n");
  int64_t bytes = 0;
  for (const data::npz::Array& array : arrays) {
    os << "  " << printable(array.key) << ": " << array.header.descr << " (loads as "
       << dtype_name(array.header.dtype) << "), shape " << shape_text(array.header.shape) << ", "
       << (array.header.fortran_order ? "Fortran" : "C") << " order, " << array.header.data_bytes() << " bytes\n";
    bytes += array.header.data_bytes();
  }
  os << "total: " << bytes << " bytes of data (" << human_bytes(bytes) << ") when loaded\n";
  return os.str();
}

std::string format_inspect(const std::string& path, const data::nifti::Header& header) {
  std::ostringstream os;
  os << path << ": NIfTI-" << header.version << ", " << header.datatype << ", dims " << shape_text(header.dims)
     << (header.dims.size() > 3 ? " (x, y, z, channels)" : " (x, y, z)") << "\n"
     << "  spacing " << header.spacing[0] << " x " << header.spacing[1] << " x " << header.spacing[2] << " "
     << header.spatial_units << ", orientation " << header.orientation << "\n";
  if (header.scl_slope != 0) os << "  scaling: value * " << header.scl_slope << " + " << header.scl_inter << "\n";
  os << "  affine (" << header.affine_source << "):\n";
  for (size_t row = 0; row < 3; ++row) {
    os << "   ";
    for (double v : header.affine[row]) os << " " << v;
    os << "\n";
  }
  if (!header.description.empty()) os << "  description: " << printable(header.description) << "\n";
  return os.str();
}

std::string format_inspect(const std::string& path, const data::pth::Checkpoint& checkpoint) {
  std::ostringstream os;
  os << path << ": PyTorch checkpoint (" << checkpoint.format << " format), " << checkpoint.tensors.size()
     << " tensors\n";
  if (!checkpoint.others.empty()) {
    os << "other entries:\n";
    for (const auto& [key, value] : checkpoint.others) os << "  " << printable(key) << " = " << printable(value) << "\n";
  }
  size_t name_width = 4, dtype_width = 5, shape_width = 5;
  for (const auto& [name, t] : checkpoint.tensors) {
    name_width = std::max(name_width, display_width(printable(name)));
    dtype_width = std::max(dtype_width, std::string(dtype_name(t.dtype())).size());
    shape_width = std::max(shape_width, shape_text(t.sizes()).size());
  }
  int64_t elements = 0, bytes = 0;
  if (!checkpoint.tensors.empty()) {
    os << "tensors:\n  " << pad_right("name", name_width) << "  " << pad_right("dtype", dtype_width) << "  "
       << pad_right("shape", shape_width) << "  bytes\n";
  }
  for (const auto& [name, t] : checkpoint.tensors) {
    const int64_t nbytes = t.numel() * static_cast<int64_t>(itemsize(t.dtype()));
    os << "  " << pad_right(printable(name), name_width) << "  " << pad_right(std::string(dtype_name(t.dtype())), dtype_width)
       << "  " << pad_right(shape_text(t.sizes()), shape_width) << "  " << nbytes << "\n";
    elements += t.numel();
    bytes += nbytes;
  }
  os << "total: " << elements << " elements, " << bytes << " bytes (" << human_bytes(static_cast<uint64_t>(bytes)) << ")\n";
  return os.str();
}

int run_inspect(const std::vector<std::string>& args, std::ostream& out) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    out << "usage: kiln inspect FILE\n";
    return 0;
  }
  if (args.size() != 1) {
    throw UsageError(args.empty() ? "needs a FILE" : "takes one FILE, got " + std::to_string(args.size()) + " arguments");
  }
  const std::string& path = args[0];
  if (path.ends_with(".npy")) {
    out << format_inspect(path, data::npy::read_header(path));
  } else if (path.ends_with(".npz")) {
    out << format_inspect(path, data::npz::File(path).arrays());
  } else if (path.ends_with(".nii") || path.ends_with(".nii.gz")) {
    out << format_inspect(path, data::nifti::read_header(path));
  } else if (path.ends_with(".pth") || path.ends_with(".pt") || path.ends_with(".ckpt")) {
    out << format_inspect(path, data::pth::load(path));
  } else {
    out << format_inspect(path, safetensors::read_header(path));
  }
  return 0;
}

}  // namespace kiln::tools
