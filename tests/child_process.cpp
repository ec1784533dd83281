// ChildProcess (child_process.h): fork, then dup2 of one pipe's write end onto stdout and
// stderr, chdir and execve with the environment built before the fork; poll(2) bounds every read, and waitpid(WNOHANG) every wait.
#include "tests/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.h"

extern char** environ;

namespace kiln::testing {

using Clock = std::chrono::steady_clock;

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const ChildOptions& options) {
  KILN_CHECK(!argv.empty(), "ChildProcess: no program");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child's environment, built before the fork (after it, only async-signal-safe calls).
  std::vector<std::string> variables;
  for (const auto& [name, value] : options.env) variables.push_back(name + "=" + value);
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const auto& [name, value] : options.env) replaced = replaced || entry.starts_with(name + "=");
    if (!replaced) variables.push_back(entry);
  }
  std::vector<char*> environment;
  for (std::string& v : variables) environment.push_back(v.data());
  environment.push_back(nullptr);
  int fds[2];
  KILN_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "ChildProcess: pipe: ", std::strerror(errno));
  pid_ = ::fork();
  KILN_CHECK(pid_ >= 0, "ChildProcess: fork: ", std::strerror(errno));
  if (pid_ == 0) {  // async-signal-safe calls only
    ::setpgid(0, 0);  // a group of its own, so that its own children go with it
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) ::_exit(126);
    ::execve(args[0], args.data(), environment.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  output_fd_ = fds[0];
}

ChildProcess::~ChildProcess() {
  if (!status_) {
    ::kill(-pid_, SIGKILL);  // the child and what it started (kiln launch's ranks)
    ::waitpid(pid_, nullptr, 0);
  }
  if (output_fd_ >= 0) ::close(output_fd_);
}

bool ChildProcess::read_some(std::chrono::milliseconds limit) {
  if (output_fd_ < 0) return false;
  pollfd p{.fd = output_fd_, .events = POLLIN, .revents = 0};
  if (::poll(&p, 1, static_cast<int>(limit.count())) <= 0) return true;
  char buffer[4096];
  const ssize_t n = ::read(output_fd_, buffer, sizeof buffer);
  if (n <= 0) {
    ::close(output_fd_);
    output_fd_ = -1;
    return false;
  }
  output_.append(buffer, static_cast<size_t>(n));
  return true;
}

bool ChildProcess::wait_for_output(const std::string& text, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (output_.find(text) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || !read_some(std::min(left, std::chrono::milliseconds(100)))) {
      return output_.find(text) != std::string::npos;
    }
  }
  return true;
}

void ChildProcess::signal(int signal) const {
  if (!status_) ::kill(pid_, signal);
}

int ChildProcess::wait_for_exit(std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!status_) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      status_ = status;
      break;
    }
    if (Clock::now() >= deadline) {
      output_ += "\n[ChildProcess: still running after the time limit; killed]\n";
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      status_ = status;
      break;
    }
    if (!read_some(std::chrono::milliseconds(50))) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  while (read_some(std::chrono::milliseconds(0))) {
    if (output_fd_ < 0) break;
    pollfd p{.fd = output_fd_, .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, 0) <= 0) break;
  }
  return *status_;
}

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

}  // namespace kiln::testing
