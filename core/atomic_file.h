// Atomic file saves, the one way Kiln writes a file: the bytes go to a fresh temporary
// file beside the target, which replaces the target by a rename only once every byte is
// on disk, so a reader, or the machine after a crash, sees the old file or the new one,
// never half of one. Used by safetensors::save (weights, optimizer state) and by the cuDNN
// algorithm cache; anything that writes a file later (checkpoints, NPY) uses it too.
//
// Note [Atomic save]: saving `path` is
//   1. Resolve. When `path` is a symlink (or a chain of them), the file replaced is the
//      last link's target, so the link stays a link and shows the new bytes; a dangling
//      link's target is created. The target must be a regular file or not exist yet.
//   2. Create the temporary file in the target's folder (so the rename cannot cross file
//      systems) with O_CREAT | O_EXCL | O_CLOEXEC under a name no other save uses,
//      ".<name>.tmp-<pid>-<n>" (n from a process-wide counter; retried on EEXIST), so two
//      threads or processes saving one path each write their own file. When the target's
//      name is too long for the affixes, its end is cut (at a UTF-8 character boundary)
//      so the temporary name fits the folder's NAME_MAX: the pid and the counter keep it
//      unique, not the name.
//   3. Keep the target's metadata. Over an existing file, the temporary file is created
//      with mode 0600 (nobody else can read it while it fills), given the old owner and
//      group where the saver may (root may; anyone may give it a group they belong to;
//      otherwise it stays the saver's, as a newly created file would), then the old
//      permission bits (after the chown, which may clear set-id bits): a 0600 file stays
//      0600. A new file gets 0666 minus the umask, as a plain open() would give it.
//   4. Write, fsync, close; rename over the target; fsync the folder, so the rename
//      itself survives a crash.
// Any failure up to and including the rename is a kiln::Error naming the file, the failing
// call and strerror; the temporary file is removed and the old file is untouched. After
// the rename the new file is in place and the save has succeeded, so a failing folder
// fsync is not thrown: commit() returns a SaveStatus with durable = false and a warning
// for the caller to show. (A file system that cannot fsync a folder at all, EINVAL, is as
// durable as it can be, and counts as durable.) Not kept across a save: hard links (the
// other names keep the old bytes), ACLs and extended attributes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

// What a save that returned says about its file, which is in place either way.
struct SaveStatus {
  bool durable = true;  // false: the folder was not fsync'd after the rename
  std::string warning;  // why not durable, naming the folder and the error; empty when durable
};

// One atomic save (Note [Atomic save]): construct (steps 1-3), write, commit (step 4).
// Destroyed without a commit, or after a failed one, it removes its temporary file.
class AtomicFile {
 public:
  // `who` names the saving function in messages ("safetensors: cannot save ...").
  AtomicFile(std::string path, std::string who);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Overwrites bytes already written, at `offset` from the start (a header filled in last).
  void write_at(int64_t offset, const void* data, size_t bytes);
  // fsync, close, rename over the target, fsync the folder. Once only.
  SaveStatus commit();

  const std::string& target() const { return target_; }        // the file replaced
  const std::string& temporary() const { return temporary_; }  // the file written; empty once renamed

 private:
  void create_temporary(const std::string& folder, const std::string& name, bool replacing);
  [[noreturn]] void fail(std::string_view call, const std::string& arguments, int error) const;
  void write_fully(const void* data, size_t bytes, int64_t offset);
  SaveStatus sync_folder() const;
  // Closes the temporary file and removes it, if one of ours is left.
  void discard() noexcept;

  std::string path_;  // as the caller named it
  std::string who_;
  std::string target_;
  std::string folder_;
  std::string temporary_;  // ours to remove until the rename; empty when there is none
  int fd_ = -1;
};

// Saves `bytes` as `path` in one AtomicFile (argument order: Note [Save and load argument
// order] in core/safetensors.h).
SaveStatus save_atomically(std::string_view bytes, const std::string& path, std::string who);

// The temporary file's name for a target named `name` (step 2): ".<name><suffix>", with
// `name` cut so the whole fits in `name_max` bytes. Exposed for its test.
std::string temporary_file_name(std::string_view name, std::string_view suffix, size_t name_max);

// ---- test seam -------------------------------------------------------------------------------

// Note [Atomic file faults]: a healthy file system does not fail an fsync or a rename on
// demand, and root ignores the permissions that would make a create fail, so tests make a
// step fail here instead: while a ScopedAtomicFileFault lives, every AtomicFile on its
// thread fails `step` as if the system call had returned -1 with errno `error` (a close
// still closes). Other threads are not affected; an inner guard stands in for an outer one
// until it ends.
enum class AtomicFileStep : uint8_t { Create, Chmod, Write, SyncFile, Close, Rename, SyncFolder };

class ScopedAtomicFileFault {
 public:
  ScopedAtomicFileFault(AtomicFileStep step, int error);
  ~ScopedAtomicFileFault();
  ScopedAtomicFileFault(const ScopedAtomicFileFault&) = delete;
  ScopedAtomicFileFault& operator=(const ScopedAtomicFileFault&) = delete;

  AtomicFileStep step() const { return step_; }
  int error() const { return error_; }

 private:
  AtomicFileStep step_;
  int error_;
  const ScopedAtomicFileFault* outer_;  // the guard it stands in for, or null
};

}  // namespace kiln
