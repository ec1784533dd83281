// `kiln launch --nproc-per-node 2 kiln train ... --ddp --sync-bn` on the CPU trains the
// same network as one process on the doubled batch (train/distributed.h: the ranks'
// batches together are the one process's batch, gradients are averaged, batch norm sees
// the whole batch), to rounding; without --sync-bn each rank normalises by its own half
// and the weights drift apart, which shows the comparison can fail. Rank 0 alone writes
// the run folder. The binary runs as a user runs it, under a watchdog.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "core/ops.h"
#include "core/safetensors.h"
#include "tests/test_util.h"
#include "tools/cli.h"

namespace kiln {
namespace {

using testing::TempFolder;

std::vector<std::string> run_args(const std::string& out, int64_t batch) {
  return {"train",
          "--size",
          "12",
          "--synthetic-samples",
          "40",
          "--model",
          "resnet10",
          "--width",
          "0.0625",
          "--batch-size",
          std::to_string(batch),
          "--epochs",
          "2",
          "--workers",
          "0",
          "--device",
          "cpu",
          "--lr",
          "1e-3",
          "--out",
          out};
}

int run(std::vector<std::string> args, std::string& output) {
  std::ostringstream out, err;
  int code = -1;
  testing::with_watchdog(std::chrono::seconds(300), [&] { code = tools::run_kiln(args, out, err); });
  output = out.str() + err.str();
  return code;
}

// Two ranks of `kiln train` with `extra` flags, batch 4 each.
int launch_two(const std::string& out, const std::vector<std::string>& extra, std::string& output) {
  std::vector<std::string> args = {
      "launch", "--nproc-per-node", "2", "--master-port", std::to_string(testing::free_port()), KILN_CLI};
  for (const std::string& a : run_args(out, 4)) args.push_back(a);
  args.insert(args.end(), extra.begin(), extra.end());
  return run(args, output);
}

// The largest |a - b| / (|b| + 1e-3) over every tensor of two weights files.
double largest_difference(const std::string& a_path, const std::string& b_path) {
  const safetensors::Loaded a = safetensors::load(a_path), b = safetensors::load(b_path);
  EXPECT_EQ(a.tensors.size(), b.tensors.size());
  double largest = 0;
  for (size_t i = 0; i < a.tensors.size() && i < b.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].first, b.tensors[i].first);
    const Tensor x = a.tensors[i].second.to(DType::Float64), y = b.tensors[i].second.to(DType::Float64);
    const Tensor relative = div(abs(sub(x, y)), add(abs(y), 1e-3));
    largest = std::max(largest, relative.numel() ? amax(relative).item<double>() : 0.0);
  }
  return largest;
}

TEST(DdpTrainCommand, TwoRanksWithSyncBatchNormMatchOneProcessOnTheDoubledBatch) {
  TempFolder folder;
  std::string output;
  ASSERT_EQ(run(run_args(folder.file("one"), 8), output), 0) << output;
  ASSERT_EQ(launch_two(folder.file("two"), {"--ddp", "--sync-bn"}, output), 0) << output;
  EXPECT_NE(output.find("[rank 0] completed after 2 epochs (10 steps"), std::string::npos) << output;
  EXPECT_EQ(output.find("[rank 1] completed"), std::string::npos) << "rank 1 printed the run's lines";
  const double synced =
      largest_difference(folder.file("two/final.safetensors"), folder.file("one/final.safetensors"));
  EXPECT_LT(synced, 2e-3);

  // Without SyncBN each rank's running statistics are its own; the ranks still agree on
  // every decision (Note [Ranks agree]): the plateau scheduler and early stopping here.
  ASSERT_EQ(launch_two(folder.file("unsynced"),
                       {"--ddp", "--scheduler", "plateau", "--plateau-patience", "0", "--patience", "1",
                        "--monitor", "loss"},
                       output),
            0)
      << output;
  const double unsynced =
      largest_difference(folder.file("unsynced/final.safetensors"), folder.file("one/final.safetensors"));
  EXPECT_GT(unsynced, 10 * synced) << "synced " << synced << ", unsynced " << unsynced;
}

}  // namespace
}  // namespace kiln
