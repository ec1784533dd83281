// ScanDataset and load_scan (data/scan_dataset.h).
#include "data/scan_dataset.h"

#include <cmath>

#include "core/error.h"
#include "core/ops.h"
#include "data/resample.h"
#include "data/volume_file.h"

namespace kiln::data {

std::array<int64_t, 3> spacing_size(const std::array<int64_t, 3>& size, const std::array<double, 3>& spacing,
                                    const std::array<double, 3>& target) {
  std::array<int64_t, 3> resized{};
  for (size_t a = 0; a < 3; ++a) {
    const double voxels = std::round(static_cast<double>(size[a]) * spacing[a] / target[a]);
    KILN_CHECK(std::isfinite(voxels) && voxels >= 1 && voxels < 1e6, "spacing: ", size[a], " voxels of ", spacing[a],
               " mm at ", target[a], " mm would be ", voxels, " voxels");
    resized[a] = static_cast<int64_t>(voxels);
  }
  return resized;
}

namespace {

Tensor load_one(const std::string& file, const ScanLoading& loading) {
  LoadedVolume volume = load_volume_with_spacing(file, {.reorient_to_ras = loading.reorient_to_ras});
  Tensor data = std::move(volume.data);
  KILN_CHECK(data.numel() > 0, "scan '", file, "' holds an empty volume, ", data.sizes());
  if (is_floating(data.dtype()) && !all(isfinite(data)).item<bool>()) {  // Note [Finite voxels]
    const int64_t bad = logical_not(isfinite(data)).sum().item<int64_t>();  // counted only to say how many
    KILN_CHECK(bad == 0, "scan '", file, "' has ", bad, " voxels that are NaN or infinite; replace them "
               "(numpy's nan_to_num, say) before training on it");
  }
  if (!loading.spacing) return data;
  KILN_CHECK(volume.spacing.has_value(), "scan '", file,
             "': --spacing resamples from the NIfTI header's voxel size, and this file has no geometry");
  for (const double s : *volume.spacing)
    KILN_CHECK(std::isfinite(s) && s > 0, "scan '", file, "': its voxel size is ", s, " mm, which cannot be resampled");
  const std::array<int64_t, 3> size{data.size(1), data.size(2), data.size(3)};
  const std::array<int64_t, 3> target = spacing_size(size, *volume.spacing, *loading.spacing);
  return target == size ? data : resize(data, target, Interpolation::Linear);
}

}  // namespace

Tensor load_scan(const std::vector<std::string>& files, const ScanLoading& loading) {
  KILN_CHECK(!files.empty(), "scan: no image file");
  std::vector<Tensor> channels;
  for (const std::string& file : files) {
    channels.push_back(load_one(file, loading));
    const Tensor& first = channels.front();
    const Tensor& last = channels.back();
    KILN_CHECK(last.size(1) == first.size(1) && last.size(2) == first.size(2) && last.size(3) == first.size(3),
               "scan: '", file, "' is ", last.sizes(), " but '", files.front(), "' is ", first.sizes(),
               "; the channels of a scan share one grid");
  }
  return channels.size() == 1 ? channels.front() : cat(channels, 0);
}

Tensor load_scan(const std::vector<std::string>& files, const ScanLoading& loading, VolumeCache& cache) {
  std::string key;
  for (const std::string& file : files) key += file + '\n';
  return cache.get(key, [&] { return load_scan(files, loading); });
}

ScanDataset::ScanDataset(std::vector<ScanSample> samples, ScanDatasetOptions options)
    : samples_(std::move(samples)), options_(std::move(options)), cache_(std::make_unique<VolumeCache>(options_.cache_bytes)) {}

Sample ScanDataset::get(int64_t index) const {
  check_index(index);
  const ScanSample& sample = samples_[static_cast<size_t>(index)];
  return {.tensors = {{kImage, load_scan(sample.images, options_.loading, *cache_)}, {kLabel, sample.label}},
          .metadata = {{"path", sample.images.front()}}};
}

}  // namespace kiln::data
