// TensorBoardWriter: scalars (losses, metrics, learning rate, loss scale, samples/s) to a
// TensorBoard event file, as torch.utils.tensorboard's SummaryWriter.add_scalar, without
// TensorFlow or protobuf.
//
// Note [Event files]: an event file is a TFRecord file: each record is
//   uint64 length (little-endian) | uint32 masked CRC-32C of the length | payload |
//   uint32 masked CRC-32C of the payload
// (core/crc32c.h), and each payload a serialised tensorflow.Event protobuf. Kiln writes the
// few fields TensorBoard reads, by hand, in protobuf's wire format (a key = field number
// << 3 | wire type, then the value: varint 0, 64-bit 1, length-delimited 2, 32-bit 5):
//   Event      { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
//                SessionLog session_log = 7; }
//   Summary    { repeated Value value = 1; }
//   Value      { string tag = 1; float simple_value = 2; }
//   SessionLog { SessionStatus status = 1; }   (START = 1)
// The first record is the file_version event "brain.Event:2". The file is named
// events.out.tfevents.<seconds>.<host>.<pid>.kiln in the log folder, which TensorBoard scans.
//
// Note [Purging after a resume]: a run resumed from a checkpoint at step S had written
// points past S before it stopped, and the resumed run writes them again. So the resumed
// run's file holds, after its file_version, a SessionLog START event at step S + 1: on it
// TensorBoard drops the points at step S + 1 and later that the earlier files held (its
// purge of orphaned data, what torch's SummaryWriter(purge_step=) writes). Every scalar is
// written against the optimizer step, so that one step purges them all.
//
// Records are buffered and appended when flush() is called, at most every two seconds, and
// when the writer goes (a PeriodicFile in Append mode, train/periodic_file.h); a failed
// write is a kiln::Error naming the file.
//
//   TensorBoardWriter tb("runs/resnet18");
//   tb.add_scalar("loss/train", loss, step);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "train/periodic_file.h"

namespace kiln::train {

class TensorBoardWriter {
 public:
  // Creates `log_dir` (and its parents) if needed.
  explicit TensorBoardWriter(const std::string& log_dir);

  // wall_time: seconds since the epoch (now when absent).
  void add_scalar(const std::string& tag, double value, int64_t step,
                  std::optional<double> wall_time = std::nullopt);
  // Note [Purging after a resume]: TensorBoard drops the earlier files' points from `step` on.
  void purge_from(int64_t step);
  void flush();
  const std::string& path() const { return file_->path(); }

 private:
  std::unique_ptr<PeriodicFile> file_;
};

// The pieces (Note [Event files]), for tests and readers of the format.
std::string tfrecord(const std::string& payload);
std::string file_version_event(double wall_time);
std::string scalar_event(const std::string& tag, float value, int64_t step, double wall_time);
std::string session_start_event(int64_t step, double wall_time);

}  // namespace kiln::train
