// Reading NPZ archives (data/npz.h): MB/s of decoded array data for an archive shaped like
// MedMNIST's AdrenalMNIST3D train split (1188 uint8 masks of 28^3, 0 or 255: spheres of
// random centre and radius), deflated (np.savez_compressed, what MedMNIST ships) and
// stored (np.savez). The archives are written once per run to
// $TMPDIR/kiln_bench_npz/{deflated,stored}.npz, where bench/data/compare_npz_read.py
// reads the same files with numpy's np.load beside this benchmark.
//
// Roofline: stored, a file read into the page cache then copied (about 2 bytes moved per
// decoded byte, so near the copy peak); deflated, zlib's inflate (a few hundred MB/s on
// one core at these ~120:1 ratios) bounds it, plus the CRC-32 over the output. One member
// inflates on one thread.
#include <cstdlib>
#include <filesystem>

#include "bench/bench_util.h"
#include "core/ops.h"
#include "data/npz.h"

namespace kiln::bench {
namespace {

constexpr int64_t kVolumes = 1188, kSide = 28;

// `kVolumes` spheres, 255 inside and 0 outside, deterministic.
Tensor sphere_masks() {
  Generator gen(7);
  const Tensor axis = arange(kSide, {.dtype = DType::Float32});
  const auto coordinate = [&](int dim) {
    std::vector<int64_t> shape = {1, 1, 1, 1};
    shape[dim] = kSide;
    return axis.view(shape);
  };
  const auto centre = [&] { return add(mul(rand({kVolumes, 1, 1, 1}, {}, &gen), 14.0), 7.0); };
  const Tensor cz = centre(), cy = centre(), cx = centre();
  const Tensor radius = add(mul(rand({kVolumes, 1, 1, 1}, {}, &gen), 6.0), 3.0);
  const Tensor distance = add(add(square(sub(coordinate(1), cz)), square(sub(coordinate(2), cy))),
                              square(sub(coordinate(3), cx)));
  return mul(lt(distance, square(radius)).to(DType::UInt8), 255);
}

std::string archive_path(bool compress) {
  const char* tmp = std::getenv("TMPDIR");
  const std::filesystem::path folder = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / "kiln_bench_npz";
  std::filesystem::create_directories(folder);
  const std::string path = (folder / (compress ? "deflated.npz" : "stored.npz")).string();
  static bool written[2] = {false, false};
  if (!written[compress]) {
    data::npz::save({{"train_images", sphere_masks()}}, path, compress);
    written[compress] = true;
  }
  return path;
}

// arg: 1 deflated, 0 stored.
void BM_NpzLoad(benchmark::State& state) {
  const bool compress = state.range(0) != 0;
  const std::string path = archive_path(compress);
  const double bytes = static_cast<double>(kVolumes * kSide * kSide * kSide);
  run_bandwidth_benchmark(state, bytes, [&] {
    const data::npz::File file(path);
    benchmark::DoNotOptimize(file.load("train_images").data_ptr());
  });
  state.SetLabel(std::string(compress ? "deflated " : "stored ") + path);
}

BENCHMARK(BM_NpzLoad)->Arg(1)->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::bench
