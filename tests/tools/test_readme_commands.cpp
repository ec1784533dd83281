// The README's commands, run as a user runs them: every `kiln ...` line of its ```sh
// blocks is read from README.md itself (continuation lines joined, comments dropped), so a
// command the README shows cannot stop working, or be edited into one that does not,
// without this test failing. Each runs as the `kiln` binary in a fresh folder, made small
// where the README leaves the size to the user: one epoch, a sixteenth of the width, no
// loader threads, the CPU (values the command gives are replaced, not repeated), and three
// steps (--profile-steps) for a run no later command reads; `...` stands for the block's
// first `kiln train` command. The own-scans block runs on scans
// this test writes (NIfTI files, manifests and folders shaped as the commands expect); the
// MedMNIST block needs the real files (../shared/data or $MEDMNIST_ROOT) and skips,
// saying so, without them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/ops.h"
#include "core/text_file.h"
#include "core/text_list.h"
#include "data/nifti.h"
#include "tests/child_process.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Command = std::vector<std::string>;

// The `kiln` lines of each ```sh block of the README, as words, in order.
std::vector<std::vector<Command>> readme_blocks() {
  std::istringstream text(read_text_file(std::string(KILN_SOURCE_DIR) + "/README.md"));
  std::vector<std::vector<Command>> blocks;
  bool in_block = false;
  std::string line, pending;
  while (std::getline(text, line)) {
    if (line.starts_with("```")) {
      in_block = line == "```sh";
      if (in_block) blocks.emplace_back();
      continue;
    }
    if (!in_block) continue;
    const size_t comment = line.find(" #");
    if (comment != std::string::npos) line.resize(comment);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    const bool continues = !line.empty() && line.back() == '\\';
    if (continues) line.pop_back();
    pending += line + " ";
    if (continues) continue;
    std::istringstream words(pending);
    Command command;
    for (std::string word; words >> word;) command.push_back(word);
    pending.clear();
    if (!command.empty() && command[0] == "kiln") blocks.back().push_back(command);
  }
  std::erase_if(blocks, [](const std::vector<Command>& block) { return block.empty(); });
  return blocks;
}

// The block whose commands include one starting with `words`.
std::vector<Command> block_with(const Command& words) {
  for (const std::vector<Command>& block : readme_blocks())
    for (const Command& command : block)
      if (command.size() >= words.size() && std::equal(words.begin(), words.end(), command.begin())) return block;
  ADD_FAILURE() << "the README has no command starting with " << joined(words, " ");
  return {};
}

// `command` with each flag of `settings` given that value: replaced where the command has
// the flag, added where it has not.
Command with_settings(Command command, const std::map<std::string, std::string>& settings) {
  for (const auto& [flag, value] : settings) {
    const auto at = std::find(command.begin(), command.end(), flag);
    if (at == command.end()) {
      command.insert(command.end(), {flag, value});
    } else if (at + 1 != command.end()) {
      *(at + 1) = value;
    }
  }
  return command;
}

const std::map<std::string, std::string> kSmall = {
    {"--epochs", "1"}, {"--width", "0.0625"}, {"--workers", "0"}, {"--device", "cpu"}, {"--batch-size", "16"}};

// The command as it runs here: the binary for `kiln`, `...` expanded, a train or
// reproduce command made small, and `.../` as the folder of the block's first run. The
// README's commands are examples, each on its own: a train command other than the
// block's first gets a folder of its own, unless it names one or resumes.
Command runnable(const Command& readme, const Command& first_train, const std::string& first_run) {
  Command out;
  for (const std::string& word : readme) {
    if (word == "kiln") {
      out.push_back(KILN_CLI);
    } else if (word == "...") {
      out.insert(out.end(), first_train.begin() + 2, first_train.end());
    } else if (word.starts_with(".../")) {
      out.push_back(first_run + word.substr(3));
    } else {
      out.push_back(word);
    }
  }
  const auto has = [&](const std::string& flag) { return std::find(out.begin(), out.end(), flag) != out.end(); };
  const bool trains = has("train") || out[1] == "reproduce";
  if (trains) out = with_settings(out, kSmall);
  if (out[1] == "reproduce") out = with_settings(out, {{"--seeds", "1"}});
  if (has("train") && readme != first_train && !has("--out") && !has("--resume")) {
    // Its own folder, and a few steps: what no later command reads need not finish.
    static int runs = 0;
    out = with_settings(out, {{"--out", "runs/readme-" + std::to_string(++runs)}});
    if (!has("--check-data")) out = with_settings(out, {{"--profile-steps", "3"}});
  }
  if (out[1] == "launch") out.insert(out.begin() + 2, {"--master-port", std::to_string(testing::free_port())});
  return out;
}

// Runs each of the block's commands in `folder`, each to exit code 0.
void run_block(const std::vector<Command>& block, const std::string& folder,
               const std::vector<std::pair<std::string, std::string>>& env, const std::string& first_run) {
  ASSERT_FALSE(block.empty());
  const auto first_train = std::find_if(block.begin(), block.end(), [](const Command& c) {
    return c.size() > 2 && c[1] == "train" && std::find(c.begin(), c.end(), "...") == c.end();
  });
  ASSERT_NE(first_train, block.end());
  for (const Command& readme : block) {
    const Command command = runnable(readme, *first_train, first_run);
    SCOPED_TRACE(joined(readme, " ") + "\n  ran as: " + joined(command, " "));
    testing::ChildProcess kiln(command, {.cwd = folder, .env = env});
    const int status = kiln.wait_for_exit(280s);
    EXPECT_EQ(testing::exit_code_of(status), 0) << kiln.output();
  }
}

// ---- the own-scans block ------------------------------------------------------------------

// A 12^3 scan whose mean brightness follows its class, so a run has something to learn.
void write_scan(const std::string& path, int64_t label, uint64_t seed) {
  const Tensor noise = testing::random_uniform({12, 12, 12}, -1, 1, DType::Float32, seed);
  data::nifti::write(path, add(mul(noise, 100.0), static_cast<double>(label) * 200.0 - 100.0));
}

// What the own-scans commands read: scans.csv (image, label, t1, flair, grade, tumour,
// oedema), scans/<class>/, ages.csv (image, age) and new_scans/.
void write_own_scans(const std::string& folder) {
  fs::create_directories(folder + "/volumes");
  std::ofstream scans(folder + "/scans.csv"), ages(folder + "/ages.csv");
  scans << "image,label,t1,flair,grade,tumour,oedema\n";
  ages << "image,age\n";
  for (int64_t i = 0; i < 20; ++i) {
    const int64_t label = i % 2;
    const std::string name = "volumes/s" + std::to_string(i);
    write_scan(folder + "/" + name + ".nii.gz", label, 10 + static_cast<uint64_t>(i));
    write_scan(folder + "/" + name + "_flair.nii.gz", label, 100 + static_cast<uint64_t>(i));
    scans << name << ".nii.gz," << label << "," << name << ".nii.gz," << name << "_flair.nii.gz," << i % 3 << ","
          << label << "," << (i / 2) % 2 << "\n";
    ages << name << ".nii.gz," << 40 + i << "\n";
    const std::string by_class = folder + "/scans/" + (label ? "tumour" : "normal");
    fs::create_directories(by_class);
    fs::copy_file(folder + "/" + name + ".nii.gz", by_class + "/s" + std::to_string(i) + ".nii.gz");
  }
  fs::create_directories(folder + "/new_scans");
  for (int64_t i = 0; i < 3; ++i) write_scan(folder + "/new_scans/n" + std::to_string(i) + ".nii.gz", i % 2, 500 + i);
}

constexpr const char* kSlowUnderSanitizers =
    "the README's runs take minutes under AddressSanitizer; `make test` runs them";

TEST(Readme, TheOwnScansCommandsRun) {
  if (testing::under_sanitizers()) GTEST_SKIP() << kSlowUnderSanitizers;
  testing::TempFolder folder;
  write_own_scans(folder.path().string());
  std::vector<Command> block = block_with({"kiln", "train", "--dataset", "scans.csv"});
  // `kiln data export` needs MedMNIST's file: it runs with the MedMNIST block.
  std::erase_if(block, [](const Command& c) { return c.size() > 2 && c[1] == "data"; });
  run_block(block, folder.path().string(), {}, "");
  EXPECT_TRUE(fs::exists(folder.file("runs/nodules/best.safetensors")));
  EXPECT_TRUE(fs::exists(folder.file("predictions.csv")));
}

// ---- the MedMNIST block --------------------------------------------------------------------

// Where the real MedMNIST files are: $MEDMNIST_ROOT or ../shared/data, "" when neither
// holds AdrenalMNIST3D and VesselMNIST3D.
std::string medmnist_root() {
  const char* env = std::getenv("MEDMNIST_ROOT");
  for (const std::string& root : {std::string(env ? env : ""), std::string(KILN_SOURCE_DIR) + "/../shared/data"}) {
    if (!root.empty() && fs::exists(root + "/adrenalmnist3d.npz") && fs::exists(root + "/vesselmnist3d.npz"))
      return fs::absolute(root).string();
  }
  return "";
}

TEST(Readme, TheMedMnistCommandsRun) {
  if (testing::under_sanitizers()) GTEST_SKIP() << kSlowUnderSanitizers;
  const std::string root = medmnist_root();
  if (root.empty())
    GTEST_SKIP() << "no adrenalmnist3d.npz and vesselmnist3d.npz in $MEDMNIST_ROOT or ../shared/data";
  testing::TempFolder folder;
  std::vector<Command> block = block_with({"kiln", "data", "download"});
  for (const Command& c : block_with({"kiln", "train", "--dataset", "scans.csv"}))
    if (c.size() > 2 && c[1] == "data") block.push_back(c);
  // `kiln data download` finds the file there (its MD5 checked), without the network.
  run_block(block, folder.path().string(), {{"MEDMNIST_ROOT", root}}, "runs/vesselmnist3d-resnet18/");
  EXPECT_TRUE(fs::exists(folder.file("runs/vesselmnist3d-resnet18/best.safetensors")));
  EXPECT_TRUE(fs::exists(folder.file("scores.csv")));
  EXPECT_TRUE(fs::exists(folder.file("adrenal")));
}

}  // namespace
}  // namespace kiln
