// TensorBoardWriter (tensorboard.h): protobuf's wire format by hand, TFRecord framing, and
// a PeriodicFile appended to (Note [Event files]).
#include "train/tensorboard.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/crc32c.h"

namespace kiln::train {
namespace {

constexpr auto kFlushInterval = std::chrono::seconds(2);

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_fixed(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>(field << 3 | wire_type));
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_double(std::string& out, int field, double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, 1);
  put_fixed(out, bits, 8);
}

std::string event_head(double wall_time, int64_t step) {
  std::string event;
  put_double(event, 1, wall_time);
  if (step != 0) {
    put_key(event, 2, 0);
    put_varint(event, static_cast<uint64_t>(step));
  }
  return event;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string tfrecord(const std::string& payload) {
  std::string record;
  put_fixed(record, payload.size(), 8);
  put_fixed(record, masked_crc32c(record.data(), 8), 4);
  record += payload;
  put_fixed(record, masked_crc32c(payload.data(), payload.size()), 4);
  return record;
}

std::string file_version_event(double wall_time) {
  std::string event = event_head(wall_time, 0);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

std::string scalar_event(const std::string& tag, float value, int64_t step, double wall_time) {
  std::string summary_value;
  put_bytes(summary_value, 1, tag);
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(summary_value, 2, 5);
  put_fixed(summary_value, bits, 4);
  std::string summary;
  put_bytes(summary, 1, summary_value);
  std::string event = event_head(wall_time, step);
  put_bytes(event, 5, summary);
  return event;
}

std::string session_start_event(int64_t step, double wall_time) {
  std::string session_log;
  put_key(session_log, 1, 0);
  put_varint(session_log, 1);  // SessionLog.START
  std::string event = event_head(wall_time, step);
  put_bytes(event, 7, session_log);
  return event;
}

TensorBoardWriter::TensorBoardWriter(const std::string& log_dir) {
  std::error_code error;
  std::filesystem::create_directories(log_dir, error);
  KILN_CHECK(!error, "TensorBoardWriter: cannot create the folder ", log_dir, ": ", error.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const double started = now_seconds();
  const std::string path =
      (std::filesystem::path(log_dir) / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(started)) +
                                         "." + host + "." + std::to_string(::getpid()) + ".kiln"))
          .string();
  file_ = std::make_unique<PeriodicFile>(path, PeriodicFile::Mode::Append, kFlushInterval, "TensorBoardWriter");
  file_->append(tfrecord(file_version_event(started)));
  flush();
}

void TensorBoardWriter::add_scalar(const std::string& tag, double value, int64_t step,
                                   std::optional<double> wall_time) {
  KILN_CHECK(!tag.empty(), "TensorBoardWriter: a scalar needs a tag");
  file_->append(tfrecord(scalar_event(tag, static_cast<float>(value), step, wall_time.value_or(now_seconds()))));
  file_->save_if_due();
}

void TensorBoardWriter::purge_from(int64_t step) {
  file_->append(tfrecord(session_start_event(step, now_seconds())));
  flush();
}

void TensorBoardWriter::flush() { file_->save(); }

}  // namespace kiln::train
