// CpuBackend's threads per calling thread: OpenMP's team size (its nthreads-var ICV),
// which every thread has its own copy of, so setting it on a DataLoader worker leaves the
// training thread's teams as they were. parallel_for (elementwise_engine.h), Eigen and
// oneDNN all size their teams from it.
#include <omp.h>

#include "core/error.h"
#include "kernels/cpu/cpu_backend.h"

namespace kiln::cpu {

void CpuBackend::set_threads_of_this_thread(int threads) {
  KILN_CHECK(threads >= 1, "set_threads_of_this_thread: threads must be >= 1, got ", threads);
  omp_set_num_threads(threads);
}

int CpuBackend::threads_of_this_thread() const { return omp_get_max_threads(); }

}  // namespace kiln::cpu
