// The distributed layer across real processes: dist::launch starts kiln_dist_worker
// (tests/dist/worker/) as 1 to 5 ranks on the loopback address, with torchrun's
// variables, and the ranks run init_process_group and every collective. Then what must
// never hang: a rank killed (SIGKILL) in the middle of an all-reduce is an error on every
// other rank within seconds, naming it; a stopped rank (SIGSTOP) is a timeout error; a
// rank that exits with an error code brings the job down with that code. Every test runs
// under a watchdog, and the launcher's kill grace bounds what the ranks can do.
#include <gtest/gtest.h>
#include <sstream>

#include <mutex>
#include <regex>

#include "core/backend.h"
#include "dist/init_process_group.h"
#include "dist/launcher.h"
#include "dist/process_group_nccl.h"
#include "dist/socket.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;

constexpr auto kLimit = std::chrono::seconds(120);


struct Job {
  dist::LaunchResult result;
  std::vector<std::string> lines;
  double seconds = 0;
  std::string output() const {
    std::string all;
    for (const std::string& line : lines) all += line + "\n";
    return all;
  }
};

Job run_workers(int64_t ranks, const std::vector<std::string>& arguments,
                std::chrono::milliseconds kill_grace = 20s) {
  Job job;
  std::mutex mutex;
  std::vector<std::string> command = {KILN_DIST_WORKER};
  command.insert(command.end(), arguments.begin(), arguments.end());
  const auto start = std::chrono::steady_clock::now();
  job.result = dist::launch({.nproc_per_node = ranks,
                             .master_port = testing::free_port(),
                             .command = command,
                             .on_line =
                                 [&](const std::string& line) {
                                   std::lock_guard<std::mutex> lock(mutex);
                                   job.lines.push_back(line);
                                 },
                             .kill_grace = kill_grace});
  job.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return job;
}

TEST(MultiProcess, EveryCollectiveWithOneToFiveRanks) {
  testing::with_watchdog(kLimit, [] {
    for (int64_t ranks = 1; ranks <= 5; ++ranks) {
      const Job job = run_workers(ranks, {"collectives"});
      SCOPED_TRACE(job.output());
      EXPECT_EQ(job.result.exit_code, 0) << job.result.failure;
      for (int64_t r = 0; r < ranks; ++r) {
        const std::string line = "[rank " + std::to_string(r) + "] rank " + std::to_string(r) + ": ok";
        EXPECT_NE(std::find(job.lines.begin(), job.lines.end(), line), job.lines.end()) << line;
      }
    }
  });
}

// The survivors' reports: "[rank R] rank R: error after S s: MESSAGE".
std::vector<std::smatch> error_reports(const Job& job, std::vector<std::string>& storage) {
  static const std::regex report(R"(^\[rank (\d+)\] rank \d+: error after ([0-9.]+) s: (.*)$)");
  std::vector<std::smatch> matches;
  storage = job.lines;
  for (const std::string& line : storage) {
    std::smatch m;
    if (std::regex_match(line, m, report)) matches.push_back(m);
  }
  return matches;
}

TEST(MultiProcess, ARankKilledInTheMiddleOfAnAllReduceIsAnErrorOnEveryOtherRankWithinSeconds) {
  testing::with_watchdog(kLimit, [] {
    // The timeout is a minute: an error within seconds comes from the closed connections.
    const Job job = run_workers(4, {"die", "1", "kill", "60000"});
    SCOPED_TRACE(job.output());
    // The launcher reports the cause, not the ranks that failed because of it.
    EXPECT_EQ(job.result.exit_code, 128 + 9);
    EXPECT_EQ(job.result.failure, "rank 1 was killed by signal 9 (Killed)");
    std::vector<std::string> storage;
    const auto reports = error_reports(job, storage);
    ASSERT_EQ(reports.size(), 3u);
    for (const std::smatch& m : reports) {
      EXPECT_LT(std::stod(m[2]), 10.0) << m[0];
      EXPECT_NE(m[3].str().find("rank 1"), std::string::npos) << m[0];
      EXPECT_NE(m[3].str().find(") failed on rank"), std::string::npos) << m[0];
    }
    EXPECT_LT(job.seconds, 30.0);
  });
}

TEST(MultiProcess, AStoppedRankIsATimeoutOnTheOthers) {
  testing::with_watchdog(kLimit, [] {
    const Job job = run_workers(3, {"die", "2", "stop", "2000"}, /*kill_grace=*/1s);
    SCOPED_TRACE(job.output());
    EXPECT_NE(job.result.exit_code, 0);
    std::vector<std::string> storage;
    const auto reports = error_reports(job, storage);
    ASSERT_EQ(reports.size(), 2u);
    bool a_timeout = false;
    for (const std::smatch& m : reports) {
      EXPECT_LT(std::stod(m[2]), 10.0) << m[0];
      a_timeout = a_timeout || m[3].str().find("timed out after 2000 ms") != std::string::npos;
    }
    EXPECT_TRUE(a_timeout);  // the others may hear of it through the aborts
    EXPECT_LT(job.seconds, 30.0);
  });
}

TEST(MultiProcess, AFailingRankBringsTheJobDownWithItsExitCode) {
  testing::with_watchdog(kLimit, [] {
    const Job job = run_workers(3, {"exit", "2", "7"}, /*kill_grace=*/5s);
    EXPECT_EQ(job.result.exit_code, 7);
    EXPECT_EQ(job.result.failed_rank, 2);
    EXPECT_EQ(job.result.failure, "rank 2 exited with code 7");
    EXPECT_LT(job.seconds, 20.0);  // the sleeping ranks were terminated, not waited for
  });
}

TEST(MultiProcess, InitProcessGroupErrorsNameTheProblem) {
  EXPECT_KILN_ERROR(dist::default_group(), "the default process group is not initialized");
  EXPECT_KILN_ERROR(
      dist::init_process_group(
          {.backend = "gloo", .rendezvous = {.rank = 0, .world_size = 1, .master_port = testing::free_port()}}),
      "unknown backend 'gloo'");
  EXPECT_FALSE(dist::is_initialized());
  if (!dist::built_with_nccl()) {
    EXPECT_KILN_ERROR(
        dist::init_process_group(
            {.backend = "nccl", .rendezvous = {.rank = 0, .world_size = 1, .master_port = testing::free_port()}}),
        "this build of Kiln has no NCCL backend");
  } else if (cuda_device_count() == 0) {
    EXPECT_KILN_ERROR(
        dist::init_process_group(
            {.backend = "nccl", .rendezvous = {.rank = 0, .world_size = 1, .master_port = testing::free_port()}}),
        "the nccl backend needs a GPU");
  }
  EXPECT_FALSE(dist::is_initialized());
  // A world of one, explicitly: every collective is the identity.
  dist::init_process_group({.rendezvous = {.rank = 0, .world_size = 1, .master_port = testing::free_port()}});
  Tensor t = ones({3});
  dist::default_group().all_reduce(t)->wait();
  EXPECT_TRUE(testing::all_equal(t, ones({3})));
  EXPECT_KILN_ERROR(dist::init_process_group(), "already initialized");
  dist::destroy_process_group();
  EXPECT_FALSE(dist::is_initialized());
}

// Note [Signals reach a rank once]: each rank leads a process group of its own, so a
// terminal's Ctrl-C reaches the launcher alone (which passes it on once).
TEST(MultiProcess, EachRankRunsInAProcessGroupOfItsOwn) {
  std::vector<std::string> lines;
  std::mutex mutex;
  const dist::LaunchResult result = dist::launch(
      {.nproc_per_node = 2,
       .command = {"/bin/sh", "-c", "echo group $(cut -d' ' -f5 /proc/$$/stat) pid $$"},
       .on_line = [&](const std::string& line) {
         std::lock_guard<std::mutex> lock(mutex);
         lines.push_back(line);
       }});
  ASSERT_EQ(result.exit_code, 0) << result.failure;
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string& line : lines) {
    std::istringstream words(line.substr(line.find("group")));
    std::string group_word, pid_word;
    long group = 0, pid = 0;
    words >> group_word >> group >> pid_word >> pid;
    EXPECT_EQ(group, pid) << line;
    EXPECT_NE(group, static_cast<long>(::getpgrp())) << line;
  }
}

TEST(MultiProcess, LaunchArgumentErrors) {
  EXPECT_KILN_ERROR(dist::launch({.nproc_per_node = 0, .command = {"true"}}), "--nproc-per-node is 0");
  EXPECT_KILN_ERROR(dist::launch({.nnodes = 2, .node_rank = 2, .command = {"true"}}),
                    "--node-rank 2 is outside 0..1");
  EXPECT_KILN_ERROR(dist::launch({}), "launch: no program to run");
  EXPECT_KILN_ERROR(dist::launch({.command = {"kiln-no-such-program"}}),
                    "'kiln-no-such-program' is not on PATH");
  // A path is named too, before any rank starts (an execve failing in a rank cannot say why).
  EXPECT_KILN_ERROR(dist::launch({.command = {"/no/such/kiln-program"}}),
                    "launch: the program '/no/such/kiln-program' does not exist");
  EXPECT_KILN_ERROR(dist::launch({.command = {"/"}}), "launch: the program '/' is not an executable file");
  EXPECT_KILN_ERROR(dist::launch({.command = {KILN_SOURCE_DIR "/README.md"}}), "README.md' is not an executable file");
}

}  // namespace
}  // namespace kiln
