// Test helper: a program run as a user runs it, in its own process, with its stdout and
// stderr read through one pipe, so a test can wait for a line it prints, send it a
// signal, and wait for its exit, each with a time limit (a regression fails, never hangs).
// A child still running when the object goes is killed (SIGKILL) and reaped. It may run
// in another folder and with variables of its own added to the environment.
//
//   testing::ChildProcess kiln({KILN_CLI, "train", ...});
//   ASSERT_TRUE(kiln.wait_for_output("run folder:", 60s));
//   kiln.signal(SIGTERM);
//   const int status = kiln.wait_for_exit(120s);  // a waitpid status
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::testing {

struct ChildOptions {
  std::string cwd = "";                                     // empty: this process's
  std::vector<std::pair<std::string, std::string>> env = {};  // set in the child only
};

class ChildProcess {
 public:
  explicit ChildProcess(const std::vector<std::string>& argv, const ChildOptions& options = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Reads output until it holds `text` (true) or the time is up or the child closed its
  // output (false).
  bool wait_for_output(const std::string& text, std::chrono::milliseconds limit);
  void signal(int signal) const;
  // The waitpid status; the child is killed (SIGKILL) and that status returned when the
  // time runs out, with output() saying so.
  int wait_for_exit(std::chrono::milliseconds limit);
  const std::string& output() const { return output_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int output_fd_ = -1;
  std::string output_;
  std::optional<int> status_;

  // Reads what is there within `limit`; false once the output is closed.
  bool read_some(std::chrono::milliseconds limit);
};

// The exit code a shell would report: the status's code, or 128 + the signal that killed it.
int exit_code_of(int status);

}  // namespace kiln::testing
