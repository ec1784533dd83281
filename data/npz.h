// NPZ files: numpy's np.savez / np.savez_compressed archives, a zip (data/zip.h) of .npy
// members (data/npy.h), one per array, named "<key>.npy". Reading lists the arrays from
// their NPY headers alone (inflating only each member's first bytes), and loads one array
// without inflating the others; writing stores or deflates each array as numpy does.
// Errors name the archive and the member: "npy: data.npz/train_images.npy: ...".
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/tensor.h"
#include "data/npy.h"
#include "data/zip.h"

namespace kiln::data::npz {

struct Array {
  std::string key;  // the member's name without ".npy"
  npy::Header header;
};

class File {
 public:
  explicit File(const std::string& path);
  // An archive in memory (the bytes must outlive it); `name` is what messages call it.
  File(std::span<const uint8_t> bytes, std::string_view name);

  // Every array's key and NPY header, in archive order; members not named *.npy are
  // skipped, as np.load's NpzFile lists only the arrays.
  std::vector<Array> arrays() const;
  bool contains(const std::string& key) const;
  // The array `key` (a CPU tensor, as npy::load), its member CRC-checked.
  Tensor load(const std::string& key) const;

 private:
  const zip::Entry& member(const std::string& key) const;
  std::string member_name(const zip::Entry& entry) const;
  zip::Archive archive_;
};

// An .npz of `arrays` (key, tensor), in order: deflated when `compress`
// (np.savez_compressed), else stored (np.savez); written atomically.
SaveStatus save(const std::vector<std::pair<std::string, Tensor>>& arrays, const std::string& path,
                bool compress = true);
std::string to_bytes(const std::vector<std::pair<std::string, Tensor>>& arrays, bool compress = true);

}  // namespace kiln::data::npz
