// TensorBoard event files (train/tensorboard.h): an event's bytes against what the protobuf
// library serialises for the same Event (09 00..f0 3f 10 03 2a 0d ..., produced with
// tensorboard's event_pb2 in Python) and the TFRecord framing's masked CRCs against
// tensorboard's own masked_crc32c; a written file parsed back record by record (framing, CRCs, fields);
// and, when Python's tensorboard package is importable (KILN_PYTHON, default python3),
// read by TensorBoard's own EventFileLoader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/test_util.h"
#include "core/crc32c.h"
#include "train/tensorboard.h"
#include "tests/train/tiny_run.h"

namespace kiln {
namespace {

std::string bytes_of(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values) out.push_back(static_cast<char>(v));
  return out;
}

uint64_t little_endian(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

TEST(TensorBoard, EventBytesAreWhatProtobufSerialises) {
  const std::string event = train::scalar_event("loss", 0.5f, 3, 1.0);
  const std::string expected =
      bytes_of({0x09, 0,    0,    0,    0,   0,   0,   0xf0, 0x3f, 0x10, 0x03, 0x2a, 0x0d,
                0x0a, 0x0b, 0x0a, 0x04, 'l', 'o', 's', 's',  0x15, 0,    0,    0,    0x3f});
  EXPECT_EQ(event, expected);
  const std::string record = train::tfrecord(event);
  ASSERT_EQ(record.size(), 8 + 4 + event.size() + 4);
  EXPECT_EQ(little_endian(record, 0, 8), event.size());
  EXPECT_EQ(little_endian(record, 8, 4), 0x2dd89b12u);  // tensorboard's masked_crc32c of the length
  EXPECT_EQ(little_endian(record, 12 + event.size(), 4), 0x7743b87fu);  // ... and of the payload
  const std::string version = train::file_version_event(0.0);
  EXPECT_NE(version.find("brain.Event:2"), std::string::npos);
}

// The records of a TFRecord file, checking the framing and both CRCs.
std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    EXPECT_LE(at + 12, file.size());
    const uint64_t length = little_endian(file, at, 8);
    EXPECT_EQ(little_endian(file, at + 8, 4), masked_crc32c(file.data() + at, 8));
    const std::string payload = file.substr(at + 12, length);
    EXPECT_EQ(little_endian(file, at + 12 + length, 4), masked_crc32c(payload.data(), payload.size()));
    records.push_back(payload);
    at += 12 + length + 4;
  }
  return records;
}

TEST(TensorBoard, AWrittenFileReadsBackRecordByRecord) {
  testing::TempFolder folder;
  std::string path;
  {
    train::TensorBoardWriter writer(folder.file("run"));
    path = writer.path();
    writer.add_scalar("loss/train", 2.5, 1, 10.0);
    writer.add_scalar("lr", 0.125, 1000000, 11.0);  // a step of several varint bytes
  }
  EXPECT_NE(path.find("events.out.tfevents."), std::string::npos);
  const std::vector<std::string> records = read_records(path);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  EXPECT_EQ(records[1], train::scalar_event("loss/train", 2.5f, 1, 10.0));
  EXPECT_EQ(records[2], train::scalar_event("lr", 0.125f, 1000000, 11.0));
  EXPECT_KILN_ERROR(train::TensorBoardWriter(folder.file("run")).add_scalar("", 1, 0),
                    "a scalar needs a tag");
}

TEST(TensorBoard, ASessionStartIsWhatProtobufSerialises) {
  // Event { wall_time: 1.0, step: 7, session_log { status: START } }
  EXPECT_EQ(train::session_start_event(7, 1.0),
            bytes_of({0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x10, 0x07, 0x3a, 0x02, 0x08, 0x01}));
}

// An event's step (0 when the field is absent), read from its bytes: wall_time first.
int64_t step_of(const std::string& event) {
  if (event.size() < 10 || static_cast<unsigned char>(event[9]) != 0x10) return 0;
  uint64_t step = 0;
  for (size_t at = 10, shift = 0; at < event.size(); ++at, shift += 7) {
    step |= static_cast<uint64_t>(static_cast<unsigned char>(event[at]) & 0x7f) << shift;
    if ((static_cast<unsigned char>(event[at]) & 0x80) == 0) break;
  }
  return static_cast<int64_t>(step);
}

// Note [Purging after a resume]: the resumed run's event file starts, after its
// file_version, with a START at the checkpoint's step + 1, and every scalar after it is at
// a later step (epoch rows included: every scalar is against the optimizer step).
TEST(TensorBoard, AResumedRunPurgesThePointsAfterItsCheckpoint) {
  testing::TempFolder folder;
  train::TrainConfig config = testing::tiny_run_config(folder.file("run"));
  config.epochs = 2;
  const testing::TinyRun first = testing::run_tiny(config);
  const int64_t steps = first.summary.steps;
  ASSERT_GT(steps, 0);
  std::vector<std::string> before;
  for (const auto& entry : std::filesystem::directory_iterator(folder.file("run")))
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) before.push_back(entry.path());
  ASSERT_EQ(before.size(), 1u);
  // Every epoch row is at the step its epoch ended.
  bool epoch_at_its_step = false;
  for (const std::string& event : read_records(before[0]))
    epoch_at_its_step = epoch_at_its_step || (event.find("val/loss") != std::string::npos && step_of(event) == steps);
  EXPECT_TRUE(epoch_at_its_step);

  config.epochs = 3;
  config.resume = folder.file("run/checkpoints/epoch-0001.safetensors");  // back to epoch 1
  testing::run_tiny(config);
  // The records of every event file, in TensorBoard's order (by name; here, one process,
  // the name may even be the same file's).
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder.file("run")))
    if (entry.path().filename().string().starts_with("events.out.tfevents.")) names.push_back(entry.path());
  std::sort(names.begin(), names.end());
  std::vector<std::string> records;
  for (const std::string& name : names)
    for (const std::string& record : read_records(name)) records.push_back(record);
  const int64_t resumed = steps / 2;  // the epoch-1 checkpoint's step
  const std::string start = train::session_start_event(resumed + 1, 0.0).substr(9);  // past the wall time
  const auto at = std::find_if(records.begin(), records.end(),
                               [&](const std::string& r) { return r.size() > 9 && r.substr(9) == start; });
  ASSERT_NE(at, records.end()) << "no START at step " << resumed + 1;
  for (auto r = at + 1; r != records.end(); ++r) {
    if (r->find("brain.Event") == std::string::npos) {
      EXPECT_GT(step_of(*r), resumed);
    }
  }
}

TEST(TensorBoard, TensorBoardsOwnReaderReadsIt) {
  testing::TempFolder folder;
  std::string path;
  {
    train::TensorBoardWriter writer(folder.path().string());
    path = writer.path();
    writer.add_scalar("loss/train", 0.75, 5);
    writer.add_scalar("auc/val", 0.875, 5);
  }
  const char* python = std::getenv("KILN_PYTHON");
  const std::string command = std::string(python != nullptr ? python : "python3") +
                              " " KILN_SOURCE_DIR "/tests/train/read_tensorboard_events.py " + path + " > " +
                              folder.file("out.txt") + " 2>&1";
  const int status = std::system(command.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
    GTEST_SKIP()
        << "Python's tensorboard package is not importable (set KILN_PYTHON to an interpreter that has it)";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command;
  std::ifstream in(folder.file("out.txt"));
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(out, "loss/train 5 0.75\nauc/val 5 0.875\nfile_version events: 1\n");
}

}  // namespace
}  // namespace kiln
