// ProcessGroupRing (dist/process_group_ring.h) with 1 to 5 ranks as threads of this
// process, over the loopback address (ranks_in_threads.h): every collective against the
// result computed locally from every rank's input, on sizes that the world size does not
// divide, zero, and sizes on both sides of the direct/ring threshold, in every dtype and
// reduction; every rank's result bitwise identical to the others'; non-contiguous
// tensors; ranks that disagree on a call, a rank that never calls (timeout) and a rank
// that leaves (closed connections) are errors naming the rank, never hangs; a failed group
// refuses later work. Every test runs under a watchdog.
#include <gtest/gtest.h>

#include <mutex>

#include "core/ops.h"
#include "dist/process_group_ring.h"
#include "tests/dist/ranks_in_threads.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using dist::ProcessGroupRing;
using dist::ReduceOp;
using testing::run_ranks_in_threads;
using namespace std::chrono_literals;

constexpr auto kLimit = std::chrono::seconds(120);

// Direct (<= 64 KiB per rank) and ring sizes, some not divisible by 2..5, and zero.
const std::vector<int64_t> kSizes = {0, 1, 7, 1000, 40009, 100003};
const std::vector<DType> kDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                    DType::Int64};

Tensor input_of(int64_t rank, int64_t numel, DType dtype, uint64_t salt) {
  return testing::random_for({numel}, dtype, 1000 * salt + static_cast<uint64_t>(rank) + 1);
}

// The reduction of every rank's input, in float64 (for integers: exact).
Tensor expected_reduction(int64_t world, int64_t numel, DType dtype, ReduceOp op, uint64_t salt) {
  Tensor acc = input_of(0, numel, dtype, salt).to(DType::Float64);
  for (int64_t r = 1; r < world; ++r) {
    const Tensor x = input_of(r, numel, dtype, salt).to(DType::Float64);
    acc = op == ReduceOp::Max ? acc.maximum(x) : op == ReduceOp::Min ? acc.minimum(x) : acc.add(x);
  }
  if (op == ReduceOp::Avg)
    acc = acc.div(scalar_tensor(static_cast<double>(world), {.dtype = DType::Float64}));
  return acc;
}

testing::Tolerance reduction_tolerance(DType dtype, int64_t world) {
  if (dtype == DType::Int64) return {0, 0};
  testing::Tolerance t = testing::tolerance_for(dtype);
  // Each hop of the ring rounds once in the tensor's dtype.
  return {t.atol * static_cast<double>(world), t.rtol * static_cast<double>(world)};
}

// Runs `collective` on every rank and checks the ranks' results are bitwise identical.
void expect_identical(const std::vector<Tensor>& results) {
  for (size_t r = 1; r < results.size(); ++r)
    EXPECT_TRUE(testing::bitwise_equal(results[r], results[0])) << "rank " << r << " differs from rank 0";
}

void expect_no_errors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(ProcessGroupRing, AllReduceEveryOpDtypeAndSizeMatchesTheLocalResult) {
  testing::with_watchdog(kLimit, [] {
    for (int world = 1; world <= 5; ++world) {
      std::mutex mutex;
      std::map<std::tuple<int64_t, int, int>, std::vector<Tensor>> results;
      expect_no_errors(run_ranks_in_threads(world, [&](ProcessGroupRing& group) {
        for (const int64_t numel : kSizes)
          for (const DType dtype : kDTypes)
            for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
              if (op == ReduceOp::Avg && dtype == DType::Int64) continue;
              Tensor t = input_of(group.rank(), numel, dtype, 7);
              group.all_reduce(t, op)->wait();
              std::lock_guard<std::mutex> lock(mutex);
              results[{numel, static_cast<int>(dtype), static_cast<int>(op)}].push_back(t);
            }
      }));
      for (const auto& [key, tensors] : results) {
        const auto [numel, dtype, op] = key;
        SCOPED_TRACE(::testing::Message()
                     << "world " << world << ", " << numel << " elements, " << static_cast<DType>(dtype)
                     << ", " << reduce_op_name(static_cast<ReduceOp>(op)));
        ASSERT_EQ(tensors.size(), static_cast<size_t>(world));
        expect_identical(tensors);
        const Tensor expected =
            expected_reduction(world, numel, static_cast<DType>(dtype), static_cast<ReduceOp>(op), 7);
        EXPECT_TRUE(testing::all_close(tensors[0].to(DType::Float64), expected,
                                       reduction_tolerance(static_cast<DType>(dtype), world)));
      }
    }
  });
}

TEST(ProcessGroupRing, AllReduceOfNonContiguousTensorsAndAsyncWorkInIssueOrder) {
  testing::with_watchdog(kLimit, [] {
    expect_no_errors(run_ranks_in_threads(3, [](ProcessGroupRing& group) {
      const Tensor base = input_of(group.rank(), 300 * 400, DType::Float32, 3).view({300, 400});
      Tensor strided = base.clone().t();  // non-contiguous, 480 KB: the ring
      Tensor small = testing::non_contiguous(input_of(group.rank(), 50, DType::Float64, 4));
      auto first = group.all_reduce(strided, ReduceOp::Max);
      auto second = group.all_reduce(small);
      auto third = group.barrier();
      third->wait();
      EXPECT_TRUE(first->is_completed() && second->is_completed());  // in issue order
      first->wait();
      second->wait();
      EXPECT_TRUE(first->is_success());
      EXPECT_TRUE(testing::all_close(strided.t().reshape({-1}).to(DType::Float64),
                                     expected_reduction(3, 300 * 400, DType::Float32, ReduceOp::Max, 3)));
      EXPECT_TRUE(testing::all_close(small.to(DType::Float64),
                                     expected_reduction(3, 50, DType::Float64, ReduceOp::Sum, 4)));
    }));
  });
}

TEST(ProcessGroupRing, BroadcastFromEveryRoot) {
  testing::with_watchdog(kLimit, [] {
    for (int world : {1, 2, 5}) {
      expect_no_errors(run_ranks_in_threads(world, [world](ProcessGroupRing& group) {
        for (const int64_t numel : kSizes)
          for (const DType dtype : kDTypes)
            for (int64_t root = 0; root < world; ++root) {
              Tensor t = input_of(group.rank(), numel, dtype, 11);
              group.broadcast(t, root)->wait();
              EXPECT_TRUE(testing::bitwise_equal(t, input_of(root, numel, dtype, 11)))
                  << numel << " " << dtype << " root " << root << " on rank " << group.rank();
            }
      }));
    }
  });
}

TEST(ProcessGroupRing, AllGatherFlatAndListForms) {
  testing::with_watchdog(kLimit, [] {
    for (int world : {1, 2, 3, 4, 5}) {
      expect_no_errors(run_ranks_in_threads(world, [world](ProcessGroupRing& group) {
        for (const int64_t numel : kSizes)
          for (const DType dtype : kDTypes) {
            const Tensor mine = input_of(group.rank(), numel, dtype, 13);
            Tensor flat = empty({world * numel}, {.dtype = dtype});
            group.all_gather_into_tensor(flat, mine)->wait();
            std::vector<Tensor> parts;
            for (int r = 0; r < world; ++r) parts.push_back(empty({numel}, {.dtype = dtype}));
            group.all_gather(parts, mine)->wait();
            for (int r = 0; r < world; ++r) {
              const Tensor theirs = input_of(r, numel, dtype, 13);
              EXPECT_TRUE(testing::bitwise_equal(flat.narrow(0, r * numel, numel).contiguous(), theirs));
              EXPECT_TRUE(testing::bitwise_equal(parts[static_cast<size_t>(r)], theirs));
            }
          }
      }));
    }
  });
}

TEST(ProcessGroupRing, ReduceScatterFlatAndListForms) {
  testing::with_watchdog(kLimit, [] {
    for (int world : {1, 2, 3, 5}) {
      expect_no_errors(run_ranks_in_threads(world, [world](ProcessGroupRing& group) {
        for (const int64_t count : {int64_t{0}, int64_t{1}, int64_t{333}, int64_t{20011}})
          for (const DType dtype : kDTypes)
            for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
              if (op == ReduceOp::Avg && dtype == DType::Int64) continue;
              const Tensor input = input_of(group.rank(), world * count, dtype, 17);
              Tensor out = empty({count}, {.dtype = dtype});
              group.reduce_scatter_tensor(out, input, op)->wait();
              Tensor out_list = empty({count}, {.dtype = dtype});
              group.reduce_scatter(out_list, input.chunk(world), op)->wait();
              const Tensor expected = expected_reduction(world, world * count, dtype, op, 17)
                                          .narrow(0, group.rank() * count, count);
              EXPECT_TRUE(
                  testing::all_close(out.to(DType::Float64), expected, reduction_tolerance(dtype, world)))
                  << dtype << " " << reduce_op_name(op) << " " << count;
              EXPECT_TRUE(testing::bitwise_equal(out_list, out));
              // The input is the caller's and stays as it was.
              EXPECT_TRUE(testing::bitwise_equal(input, input_of(group.rank(), world * count, dtype, 17)));
            }
      }));
    }
  });
}

TEST(ProcessGroupRing, CoalescedAllReduceEqualsOneByOne) {
  testing::with_watchdog(kLimit, [] {
    expect_no_errors(run_ranks_in_threads(3, [](ProcessGroupRing& group) {
      std::vector<Tensor> together = {
          input_of(group.rank(), 7, DType::Float32, 21), input_of(group.rank(), 100003, DType::Float64, 22),
          input_of(group.rank(), 0, DType::Int64, 23),
          testing::non_contiguous(input_of(group.rank(), 999, DType::BFloat16, 24))};
      std::vector<Tensor> apart;
      for (const Tensor& t : together) apart.push_back(t.clone());
      const auto work = group.all_reduce_coalesced(together, ReduceOp::Max);
      work->wait();
      for (Tensor& t : apart) group.all_reduce(t, ReduceOp::Max)->wait();
      for (size_t i = 0; i < together.size(); ++i)
        EXPECT_TRUE(testing::bitwise_equal(together[i], apart[i])) << i;
      EXPECT_KILN_ERROR(group.all_reduce_coalesced({}), "all_reduce_coalesced: no tensors");
    }));
  });
}

TEST(ProcessGroupRing, ArgumentErrorsOnTheCallingThread) {
  testing::with_watchdog(kLimit, [] {
    expect_no_errors(run_ranks_in_threads(2, [](ProcessGroupRing& group) {
      EXPECT_KILN_ERROR(group.all_reduce(zeros({3}, {.dtype = DType::Int64}), ReduceOp::Avg),
                        "all_reduce: avg needs a floating-point tensor");
      EXPECT_KILN_ERROR(group.all_reduce(zeros({3}, {.dtype = DType::Bool})), "all_reduce", "bool");
      EXPECT_KILN_ERROR(group.broadcast(zeros({3}), 2), "broadcast: root 2 is not a rank of this group of 2");
      EXPECT_KILN_ERROR(group.all_gather_into_tensor(zeros({5}), zeros({3})), "all_gather: the output has 5",
                        "2 x 3");
      EXPECT_KILN_ERROR(group.reduce_scatter_tensor(zeros({3}), zeros({5})),
                        "reduce_scatter: the input has 5");
      EXPECT_KILN_ERROR(group.all_gather({zeros({3})}, zeros({3})),
                        "all_gather: 1 output tensors for a group of 2");
      EXPECT_KILN_ERROR(group.all_reduce(Tensor()), "all_reduce: the tensor is undefined");
      group.barrier()->wait();  // the group still works: nothing was issued
    }));
  });
}

TEST(ProcessGroupRing, RanksThatDisagreeOnTheCallAreNamed) {
  testing::with_watchdog(kLimit, [] {
    const auto errors = run_ranks_in_threads(2, [](ProcessGroupRing& group) {
      Tensor t = zeros({group.rank() == 0 ? 100 : 200});
      group.all_reduce(t)->wait();
    });
    for (const std::string& e : errors) {
      EXPECT_NE(e.find("ranks disagree on the collective"), std::string::npos) << e;
      EXPECT_NE(e.find("100 elements"), std::string::npos) << e;
      EXPECT_NE(e.find("200 elements"), std::string::npos) << e;
    }
  });
}

TEST(ProcessGroupRing, ARankThatNeverCallsIsATimeoutNamingIt) {
  testing::with_watchdog(kLimit, [] {
    const auto start = std::chrono::steady_clock::now();
    const auto errors = run_ranks_in_threads(
        3,
        [](ProcessGroupRing& group) {
          if (group.rank() == 2) {
            std::this_thread::sleep_for(2500ms);  // silent, connections open, past the others' timeout
            return;
          }
          Tensor t = zeros({1 << 20});  // the ring: rank 0 waits for rank 2, rank 1 for rank 0
          group.all_reduce(t)->wait();
        },
        1500ms);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
    EXPECT_NE(errors[0].find("timed out after 1500 ms"), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find("waiting for rank 2"), std::string::npos) << errors[0];
    EXPECT_NE(errors[1].find("all_reduce #0"), std::string::npos) << errors[1];
  });
}

TEST(ProcessGroupRing, ARankThatLeavesIsAnErrorOnTheOthersAtOnceAndTheGroupStaysAborted) {
  testing::with_watchdog(kLimit, [] {
    std::vector<double> seconds(4, 0);
    const auto errors = run_ranks_in_threads(
        4,
        [&](ProcessGroupRing& group) {
          if (group.rank() == 2) throw Error("rank 2 leaves");  // its group closes its connections
          Tensor t = zeros({1 << 20});
          const auto start = std::chrono::steady_clock::now();
          try {
            group.all_reduce(t)->wait();
          } catch (const Error&) {
            seconds[static_cast<size_t>(group.rank())] =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            EXPECT_KILN_ERROR(group.barrier()->wait(),
                              "cannot run: the group was aborted after an earlier failure");
            throw;
          }
        },
        60s);
    for (int r : {0, 1, 3}) {
      SCOPED_TRACE(errors[static_cast<size_t>(r)]);
      EXPECT_NE(errors[static_cast<size_t>(r)].find(
                    "all_reduce #0 (sum, float32, 1048576 elements) failed on rank"),
                std::string::npos);
      EXPECT_LT(seconds[static_cast<size_t>(r)], 10.0) << "rank " << r << " noticed only after the timeout";
    }
    // Rank 1 sends to 2 and rank 3 receives from it: they name rank 2 directly; rank 0
    // hears of it through rank 3 or 1, whose abort reason names rank 2.
    EXPECT_NE(errors[0].find("rank 2"), std::string::npos) << errors[0];
  });
}

}  // namespace
}  // namespace kiln
