// kiln_dist_worker: one rank of the multi-process tests (tests/dist/test_multi_process.cpp),
// started by dist::launch with torchrun's variables. Scenarios (argv[1]):
//   collectives          every collective over init_process_group's default group and a
//                        sub-group, checked against the result computed locally from every
//                        rank's (deterministic) input; prints "rank R: ok"
//   die VICTIM HOW MS    all-reduces 4 MB in a loop with a timeout of MS; rank VICTIM sends
//                        itself SIGKILL or SIGSTOP (HOW = kill|stop) 300 ms in. The others
//                        print "rank R: error after S s: MESSAGE" and exit 3. SIGTERM is
//                        ignored so a rank reports before the launcher's tear-down.
//   exit RANK CODE       rank RANK exits with CODE at once; the others sleep 60 s.
// Exits 0 on success, 1 on a wrong result, 2 on wrong arguments.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "core/ops.h"
#include "dist/init_process_group.h"
#include "kiln/init.h"
#include "tests/test_util.h"

namespace {

using namespace kiln;
using dist::ReduceOp;

bool check(bool ok, const std::string& what) {
  if (!ok) std::cout << "rank " << dist::get_rank() << ": WRONG " << what << std::endl;
  return ok;
}

Tensor input_of(int64_t rank, int64_t numel, DType dtype) {
  return kiln::testing::random_for({numel}, dtype, static_cast<uint64_t>(rank) + 1);
}

int collectives() {
  dist::init_process_group({.timeout = std::chrono::seconds(60)});
  const int64_t rank = dist::get_rank(), world = dist::get_world_size();
  dist::ProcessGroup& group = dist::default_group();
  bool ok = true;
  for (const int64_t numel : {int64_t{0}, int64_t{5}, int64_t{70001}}) {
    for (const DType dtype : {DType::Float32, DType::Int64}) {
      Tensor sum = input_of(rank, numel, dtype);
      group.all_reduce(sum)->wait();
      Tensor expected = zeros({numel}, {.dtype = DType::Float64});
      for (int64_t r = 0; r < world; ++r)
        expected = expected.add(input_of(r, numel, dtype).to(DType::Float64));
      ok &= check(static_cast<bool>(kiln::testing::all_close(sum.to(DType::Float64), expected,
                                                             kiln::testing::tolerance_for(dtype))),
                  "all_reduce");
      Tensor root_value = input_of(rank, numel, dtype);
      group.broadcast(root_value, world - 1)->wait();
      ok &= check(
          static_cast<bool>(kiln::testing::bitwise_equal(root_value, input_of(world - 1, numel, dtype))),
          "broadcast");
      Tensor gathered = empty({world * numel}, {.dtype = dtype});
      group.all_gather_into_tensor(gathered, input_of(rank, numel, dtype))->wait();
      for (int64_t r = 0; r < world; ++r)
        ok &= check(static_cast<bool>(kiln::testing::bitwise_equal(
                        gathered.narrow(0, r * numel, numel).contiguous(), input_of(r, numel, dtype))),
                    "all_gather");
    }
  }
  // A sub-group of the even ranks, listed in reverse: its rank order is the list's.
  std::vector<int64_t> evens;
  for (int64_t r = world - 1; r >= 0; --r)
    if (r % 2 == 0) evens.push_back(r);
  const std::shared_ptr<dist::ProcessGroup> sub = dist::new_group(evens);
  ok &= check((sub != nullptr) == (rank % 2 == 0), "new_group membership");
  if (sub) {
    Tensor value = scalar_tensor(static_cast<double>(rank), {.dtype = DType::Int64}).reshape({1});
    sub->all_reduce(value, ReduceOp::Max)->wait();
    ok &= check(value.item<int64_t>() == evens.front(), "sub-group all_reduce");
    ok &= check(sub->size() == static_cast<int64_t>(evens.size()), "sub-group size");
  }
  group.barrier()->wait();
  dist::destroy_process_group();
  std::cout << "rank " << rank << ": " << (ok ? "ok" : "failed") << std::endl;
  return ok ? 0 : 1;
}

int die(int64_t victim, const std::string& how, int64_t timeout_ms) {
  ::signal(SIGTERM, SIG_IGN);
  dist::init_process_group({.timeout = std::chrono::milliseconds(timeout_ms)});
  const int64_t rank = dist::get_rank();
  if (rank == victim) {
    std::thread([how] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::raise(how == "kill" ? SIGKILL : SIGSTOP);
    }).detach();
  }
  Tensor t = ones({1 << 20});
  auto start = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < 1000000; ++i) {
      start = std::chrono::steady_clock::now();
      dist::default_group().all_reduce(t)->wait();
    }
  } catch (const Error& e) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank %lld: error after %.2f s: %s\n", static_cast<long long>(rank), seconds, e.what());
    std::fflush(stdout);
    std::_Exit(3);  // skip destructors: the default group would wait for nothing more
  }
  return 0;
}

int exit_with(int64_t rank_to_exit, int code) {
  const char* rank = std::getenv("RANK");
  if (rank != nullptr && std::stoll(rank) == rank_to_exit) return code;
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  try {
    kiln::init();
    if (scenario == "collectives") return collectives();
    if (scenario == "die" && argc == 5) return die(std::stoll(argv[2]), argv[3], std::stoll(argv[4]));
    if (scenario == "exit" && argc == 4) return exit_with(std::stoll(argv[2]), std::stoi(argv[3]));
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << std::endl;
    return 1;
  }
  std::cerr << "usage: kiln_dist_worker collectives | die VICTIM kill|stop TIMEOUT_MS | exit RANK CODE\n";
  return 2;
}
