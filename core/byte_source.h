// Where a reader's bytes come from: a file, read on demand with pread (so a reader holds
// no more of a file than it asks for, and a large tensor is read straight into its own
// memory), or a buffer already in memory (what the fuzzers and in-memory loads hand
// over). The safetensors reader (core/safetensors.cpp) and data/'s NPY and NPZ readers
// read through it; every reader checks a range against size() before reading it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kiln {

class ByteSource {
 public:
  // `name` is what messages call the bytes: the path, or a caller's name for a buffer.
  explicit ByteSource(std::string name) : name_(std::move(name)) {}
  virtual ~ByteSource() = default;
  virtual int64_t size() const = 0;
  // Copies [offset, offset + n) into dst; the caller checked the range against size().
  virtual void read(int64_t offset, void* dst, int64_t n) const = 0;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(std::span<const uint8_t> bytes, std::string_view name);
  int64_t size() const override { return static_cast<int64_t>(bytes_.size()); }
  void read(int64_t offset, void* dst, int64_t n) const override;

 private:
  std::span<const uint8_t> bytes_;
};

// An open regular file. `who` prefixes the messages ("safetensors: cannot open ...").
class FileSource final : public ByteSource {
 public:
  FileSource(const std::string& path, std::string who);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  int64_t size() const override { return size_; }
  // A short read (the file shrank while open) or an I/O error is a kiln::Error.
  void read(int64_t offset, void* dst, int64_t n) const override;

 private:
  std::string who_;
  int fd_ = -1;
  int64_t size_ = 0;
};

}  // namespace kiln
