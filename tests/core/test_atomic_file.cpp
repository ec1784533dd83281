// The atomic writer (core/atomic_file.h, Note [Atomic save]): what a save keeps of the
// file it replaces (permission bits, owner, symlinks), long names, concurrent saves of
// one path, and, through the test seam (Note [Atomic file faults]), a failure at each
// step: before the rename an error that leaves the old file and no temporary file, after
// it a report.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// A fresh empty folder per test (testing::TempFolder), removed afterwards.
class AtomicFileTest : public ::testing::Test {
 protected:
  const fs::path& folder() const { return temp_.path(); }
  std::string path(const std::string& name = "file.bin") const { return (folder() / name).string(); }
  std::vector<std::string> entries() const { return temp_.entries(); }

  static std::string read(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  static mode_t mode_of(const std::string& file) {
    struct stat info {};
    EXPECT_EQ(::stat(file.c_str(), &info), 0) << file;
    return info.st_mode & 07777;
  }

  testing::TempFolder temp_;
};

// ---- what a save keeps ------------------------------------------------------------------------

// A save over a 0600 file once made it 0644 (the temporary file had 0666 minus the umask).
TEST_F(AtomicFileTest, KeepsThePermissionBitsOfTheFileItReplaces) {
  for (const mode_t mode : {0600, 0640, 0755, 0444}) {
    save_atomically("old", path(), "test");
    ASSERT_EQ(::chmod(path().c_str(), mode), 0);
    save_atomically("new", path(), "test");
    EXPECT_EQ(mode_of(path()), mode) << std::oct << mode;
    EXPECT_EQ(read(path()), "new");
  }
}

TEST_F(AtomicFileTest, ANewFileGetsTheModeTheUmaskAllows) {
  const mode_t previous = ::umask(027);
  save_atomically("new", path(), "test");
  ::umask(previous);
  EXPECT_EQ(mode_of(path()), 0640u);
}

// Owner: kept where the saver may give the file away (root); otherwise the saver's.
TEST_F(AtomicFileTest, KeepsTheOwnerAndGroupWhereAllowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a file to another owner needs root";
  save_atomically("old", path(), "test");
  if (::chown(path().c_str(), 4321, 8765) != 0) {
    GTEST_SKIP() << "this file system or user namespace refuses uid 4321: " << std::strerror(errno);
  }
  ASSERT_EQ(::chmod(path().c_str(), 0640), 0);
  save_atomically("new", path(), "test");
  struct stat info {};
  ASSERT_EQ(::stat(path().c_str(), &info), 0);
  EXPECT_EQ(info.st_uid, 4321u);
  EXPECT_EQ(info.st_gid, 8765u);
  EXPECT_EQ(info.st_mode & 07777, 0640u);
}

// A save through a symlink once replaced the link by a regular file.
TEST_F(AtomicFileTest, WritesThroughASymlinkWhichStaysALink) {
  save_atomically("old", path("target.bin"), "test");
  fs::create_symlink("target.bin", path("link.bin"));
  const SaveStatus status = save_atomically("new", path("link.bin"), "test");
  EXPECT_TRUE(status.durable) << status.warning;
  EXPECT_TRUE(fs::is_symlink(path("link.bin")));
  EXPECT_EQ(fs::read_symlink(path("link.bin")), "target.bin");
  EXPECT_EQ(read(path("target.bin")), "new");
  EXPECT_EQ(entries(), (std::vector<std::string>{"link.bin", "target.bin"}));
}

// Relative links are relative to their own folder; the temporary file goes beside the
// final target, so the rename stays in one folder.
TEST_F(AtomicFileTest, FollowsAChainOfSymlinksToTheFinalTarget) {
  fs::create_directory(folder() / "sub");
  save_atomically("old", path("final.bin"), "test");
  fs::create_symlink("../final.bin", path("sub/middle.bin"));
  fs::create_symlink("sub/middle.bin", path("first.bin"));
  AtomicFile file(path("first.bin"), "test");
  EXPECT_EQ(fs::path(file.target()), folder() / "sub" / ".." / "final.bin");
  EXPECT_EQ(fs::path(file.temporary()).parent_path(), folder() / "sub" / "..");
  file.write("new");
  file.commit();
  EXPECT_TRUE(fs::is_symlink(path("first.bin")));
  EXPECT_TRUE(fs::is_symlink(path("sub/middle.bin")));
  EXPECT_EQ(read(path("final.bin")), "new");
}

TEST_F(AtomicFileTest, ADanglingSymlinkGetsItsTargetCreated) {
  fs::create_symlink("missing.bin", path("link.bin"));
  save_atomically("new", path("link.bin"), "test");
  EXPECT_TRUE(fs::is_symlink(path("link.bin")));
  EXPECT_EQ(read(path("missing.bin")), "new");
}

TEST_F(AtomicFileTest, ASymlinkLoopIsAnError) {
  fs::create_symlink("b", path("a"));
  fs::create_symlink("a", path("b"));
  EXPECT_KILN_ERROR(save_atomically("x", path("a"), "test"), "test: cannot save " + path("a"),
                    "symbolic links in a chain");
  EXPECT_EQ(entries(), (std::vector<std::string>{"a", "b"}));
}

TEST_F(AtomicFileTest, RefusesToReplaceWhatIsNotARegularFile) {
  fs::create_directory(folder() / "dir.bin");
  EXPECT_KILN_ERROR(save_atomically("x", path("dir.bin"), "test"), "is not a regular file");
  EXPECT_KILN_ERROR(save_atomically("x", path() + "/", "test"), "names a folder, not a file");
  EXPECT_EQ(entries(), std::vector<std::string>{"dir.bin"});
}

// ---- names --------------------------------------------------------------------------------------

// With its affixes, the temporary name of a 250-byte name was over NAME_MAX (255), and
// the save failed with ENAMETOOLONG.
TEST_F(AtomicFileTest, SavesFileNamesUpToNameMax) {
  for (const size_t length : {200, 240, 250, 255}) {
    const std::string name(length, 'n');
    const SaveStatus status = save_atomically("bytes", path(name), "test");
    EXPECT_TRUE(status.durable) << status.warning;
    EXPECT_EQ(read(path(name)), "bytes") << length;
  }
  EXPECT_EQ(entries().size(), 4u);  // no temporary file left
}

TEST(AtomicFileName, FitsNameMaxAndCutsOnlyBetweenCharacters) {
  const std::string suffix = ".tmp-4194304-18446744073709551615";  // the longest pid and counter
  EXPECT_EQ(temporary_file_name("w.safetensors", ".tmp-1-2", 255), ".w.safetensors.tmp-1-2");
  const std::string ascii = temporary_file_name(std::string(255, 'a'), suffix, 255);
  EXPECT_EQ(ascii.size(), 255u);
  EXPECT_EQ(ascii.substr(ascii.size() - suffix.size()), suffix);
  // 'é' is two bytes: a cut keeps whole characters, so an even count of them.
  std::string accents;
  for (int i = 0; i < 127; ++i) accents += "\xC3\xA9";
  const std::string cut = temporary_file_name(accents, suffix, 255);
  EXPECT_LE(cut.size(), 255u);
  EXPECT_EQ((cut.size() - 1 - suffix.size()) % 2, 0u) << cut;
}

// ---- concurrency ----------------------------------------------------------------------------

// Each save writes its own temporary file (O_EXCL, pid and counter), so saves of one path
// from several threads all succeed and the file is always one of them, whole.
TEST_F(AtomicFileTest, ConcurrentSavesOfOnePathAllSucceed) {
  constexpr int kThreads = 4;
  const std::vector<std::string> errors = testing::errors_of_concurrent_runs(kThreads, [&](int thread) {
    const std::string bytes(64 * 1024, static_cast<char>('a' + thread));
    for (int i = 0; i < 25; ++i) save_atomically(bytes, path(), "test");
  });
  EXPECT_EQ(errors, std::vector<std::string>(kThreads));
  const std::string result = read(path());
  ASSERT_EQ(result.size(), 64u * 1024);
  EXPECT_EQ(std::count(result.begin(), result.end(), result[0]), static_cast<long>(result.size()));
  EXPECT_EQ(entries(), std::vector<std::string>{"file.bin"});
}

// ---- failures (Note [Atomic file faults]) -----------------------------------------------------

TEST_F(AtomicFileTest, AFailureBeforeTheRenameLeavesTheOldFileAndNoTemporary) {
  const std::pair<AtomicFileStep, const char*> steps[] = {
      {AtomicFileStep::Create, "open("},  {AtomicFileStep::Chmod, "fchmod("},
      {AtomicFileStep::Write, "write("},  {AtomicFileStep::SyncFile, "fsync("},
      {AtomicFileStep::Close, "close("},  {AtomicFileStep::Rename, "rename("}};
  save_atomically("old", path(), "test");
  for (const auto& [step, call] : steps) {
    {
      const ScopedAtomicFileFault fault(step, ENOSPC);
      EXPECT_KILN_ERROR(save_atomically("new", path(), "test"), "test: cannot save " + path(), call,
                        std::string(") failed: ") + std::strerror(ENOSPC));
    }
    EXPECT_EQ(read(path()), "old") << call;
    EXPECT_EQ(entries(), std::vector<std::string>{"file.bin"}) << call;
  }
}

TEST_F(AtomicFileTest, DestroyedWithoutACommitItRemovesItsTemporaryFile) {
  {
    AtomicFile file(path(), "test");
    file.write("partial");
    EXPECT_TRUE(fs::exists(file.temporary()));
  }
  EXPECT_TRUE(entries().empty());
}

TEST_F(AtomicFileTest, AMissingFolderIsAnErrorNamingIt) {
  EXPECT_KILN_ERROR(save_atomically("x", path("missing/file.bin"), "test"),
                    "cannot create a temporary file in " + path("missing"), std::strerror(ENOENT));
}

TEST_F(AtomicFileTest, AReadOnlyFolderIsAnErrorAndLeavesNothing) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores folder permissions (the Create fault above covers it)";
  save_atomically("old", path(), "test");
  fs::permissions(folder(), fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_KILN_ERROR(save_atomically("new", path(), "test"), "cannot create a temporary file",
                    std::strerror(EACCES));
  fs::permissions(folder(), fs::perms::owner_all);
  EXPECT_EQ(read(path()), "old");
  EXPECT_EQ(entries(), std::vector<std::string>{"file.bin"});
}

// After the rename the new file is in place: a failing folder fsync once threw "save
// failed" although the save had happened. It is a report now.
TEST_F(AtomicFileTest, AFolderFsyncFailureAfterTheRenameIsReportedNotThrown) {
  save_atomically("old", path(), "test");
  SaveStatus status;
  {
    const ScopedAtomicFileFault fault(AtomicFileStep::SyncFolder, EIO);
    status = save_atomically("new", path(), "test");
  }
  EXPECT_FALSE(status.durable);
  EXPECT_NE(status.warning.find("test: saved " + path() + ", but fsync(" + folder().string() +
                                ") failed: " + std::strerror(EIO)),
            std::string::npos)
      << status.warning;
  EXPECT_EQ(read(path()), "new");
  EXPECT_EQ(entries(), std::vector<std::string>{"file.bin"});
}

// A file system that cannot fsync a folder at all says EINVAL: nothing to report.
TEST_F(AtomicFileTest, AFolderThatCannotBeFsyncedCountsAsDurable) {
  const ScopedAtomicFileFault fault(AtomicFileStep::SyncFolder, EINVAL);
  const SaveStatus status = save_atomically("new", path(), "test");
  EXPECT_TRUE(status.durable);
  EXPECT_TRUE(status.warning.empty());
}

TEST_F(AtomicFileTest, AFaultAffectsOnlyItsOwnThread) {
  const ScopedAtomicFileFault fault(AtomicFileStep::Rename, EIO);
  std::thread other([&] { save_atomically("other", path(), "test"); });
  other.join();
  EXPECT_EQ(read(path()), "other");
  {
    const ScopedAtomicFileFault inner(AtomicFileStep::Write, EIO);
    EXPECT_KILN_ERROR(save_atomically("x", path(), "test"), "write(");
  }
  EXPECT_KILN_ERROR(save_atomically("x", path(), "test"), "rename(");  // the outer fault is back
}

}  // namespace
}  // namespace kiln
