// kiln_mpi_allreduce_bench: Open MPI's MPI_Allreduce measured exactly as
// kiln_allreduce_bench measures Kiln's ring (allreduce.cpp): the same sizes, iteration
// counts, warm-up and barrier, float32 sum in place; rank 0 prints
// "bytes time_us algbw_GB/s busbw_GB/s". Built when CMake finds MPI; run with mpirun.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int64_t min_bytes = 4096, max_bytes = int64_t{256} << 20;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--min-bytes") min_bytes = std::stoll(argv[i + 1]);
    if (std::string(argv[i]) == "--max-bytes") max_bytes = std::stoll(argv[i + 1]);
  }
  if (rank == 0) std::printf("# Open MPI MPI_Allreduce, %d ranks, float32 sum, in place\n", size);
  for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    std::vector<float> buffer(static_cast<size_t>(bytes / 4), 1.0f);
    const int count = static_cast<int>(buffer.size());
    const int64_t iterations = std::clamp<int64_t>((int64_t{1} << 30) / bytes, 5, 200);
    for (int i = 0; i < 3; ++i)
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int64_t i = 0; i < iterations; ++i)
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double per_op = (MPI_Wtime() - start) / static_cast<double>(iterations);
    const double algbw = static_cast<double>(bytes) / per_op / 1e9;
    const double busbw = algbw * 2.0 * (size - 1) / size;
    if (rank == 0)
      std::printf("%lld %.1f %.3f %.3f\n", static_cast<long long>(bytes), per_op * 1e6, algbw, busbw);
  }
  MPI_Finalize();
  return 0;
}
