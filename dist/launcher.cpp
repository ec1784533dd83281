// launch (launcher.h): fork and execve per rank with the environment prepared beforehand
// (only async-signal-safe calls between the two), one pipe per rank for its output, and
// a poll loop that prefixes lines, reaps ranks, tears the job down on the first failure
// and forwards signals through a self-pipe (a rank that stops for a forwarded signal has
// not failed: the others are left to stop for it too).
#include "dist/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <optional>
#include <vector>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/signal_name.h"

extern char** environ;

namespace kiln::dist {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kFailureWindow = std::chrono::milliseconds(250);  // Note [Which failure]

// The launcher's signal handler writes the signal's number here (Note: self-pipe).
int g_signal_pipe[2] = {-1, -1};

void on_signal(int signal) {
  const unsigned char number = static_cast<unsigned char>(signal);
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &number, 1);
}

// Installs the forwarding handlers (for kStopSignals, core/signal_name.h) for its lifetime.
class SignalForwarding {
 public:
  explicit SignalForwarding(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
    KILN_CHECK(::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) == 0, "launch: pipe: ", std::strerror(errno));
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(kStopSignals); ++i)
      ::sigaction(kStopSignals[i], &action, &previous_[i]);
  }
  ~SignalForwarding() {
    if (!enabled_) return;
    for (size_t i = 0; i < std::size(kStopSignals); ++i) ::sigaction(kStopSignals[i], &previous_[i], nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  int fd() const { return enabled_ ? g_signal_pipe[0] : -1; }

 private:
  bool enabled_;
  struct sigaction previous_[std::size(kStopSignals)] {};
};

// Whether a rank's exit answers a signal the launcher forwarded: killed by it, or exiting
// with 128 + its number after stopping cleanly (train/stop_signals.h). Such an exit is no
// failure: the others are stopping for the same signal, and are left to finish.
bool answers_forwarded(int status, const std::vector<int>& forwarded) {
  for (const int signal : forwarded) {
    if (WIFSIGNALED(status) && WTERMSIG(status) == signal) return true;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 128 + signal) return true;
  }
  return false;
}

// The program's path: as given when it has a '/', else the first match on PATH.
std::string resolve_program(const std::string& program) {
  if (program.find('/') != std::string::npos) {  // a path: it must be there and executable
    std::error_code ec;
    KILN_CHECK(std::filesystem::exists(program, ec), "launch: the program '", program, "' does not exist");
    KILN_CHECK(!std::filesystem::is_directory(program, ec) && ::access(program.c_str(), X_OK) == 0,
               "launch: the program '", program, "' is not an executable file");
    return program;
  }
  const char* path = std::getenv("PATH");
  std::string directories = path != nullptr ? path : "/usr/bin:/bin";
  size_t at = 0;
  while (at <= directories.size()) {
    size_t end = directories.find(':', at);
    if (end == std::string::npos) end = directories.size();
    const std::string candidate = (end == at ? "." : directories.substr(at, end - at)) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  KILN_CHECK(false, "launch: the program '", program, "' is not on PATH");
  return {};
}

bool is_rank_variable(const std::string& entry) {
  for (const char* name : {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "GROUP_RANK=",
                           "MASTER_ADDR=", "MASTER_PORT="})
    if (entry.rfind(name, 0) == 0) return true;
  return false;
}

std::vector<std::string> rank_environment(const LaunchOptions& o, int64_t local_rank, int64_t world) {
  std::vector<std::string> env;
  bool has_omp = false;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (is_rank_variable(entry)) continue;
    has_omp = has_omp || entry.rfind("OMP_NUM_THREADS=", 0) == 0;
    env.push_back(entry);
  }
  const int64_t rank = o.node_rank * o.nproc_per_node + local_rank;
  env.push_back("RANK=" + std::to_string(rank));
  env.push_back("WORLD_SIZE=" + std::to_string(world));
  env.push_back("LOCAL_RANK=" + std::to_string(local_rank));
  env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(o.nproc_per_node));
  env.push_back("GROUP_RANK=" + std::to_string(o.node_rank));
  env.push_back("MASTER_ADDR=" + o.master_addr);
  env.push_back("MASTER_PORT=" + std::to_string(o.master_port));
  if (!has_omp && o.nproc_per_node > 1) env.push_back("OMP_NUM_THREADS=1");
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// One running rank: its process, its output pipe and the partial line read so far.
struct Rank {
  int64_t rank = 0;
  pid_t pid = -1;
  int output = -1;  // read end of its pipe; -1 once at end of file
  std::string partial = {};
  std::optional<int> status = std::nullopt;  // waitpid's, once it has exited
};

Rank start(const LaunchOptions& o, const std::string& program, int64_t local_rank, int64_t world) {
  std::vector<std::string> env = rank_environment(o, local_rank, world);
  std::vector<std::string> args = o.command;
  std::vector<char*> envp = pointers(env), argv = pointers(args);
  int pipe_fds[2];
  KILN_CHECK(::pipe2(pipe_fds, O_CLOEXEC) == 0, "launch: pipe: ", std::strerror(errno));
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  KILN_CHECK(pid >= 0, "launch: fork: ", std::strerror(errno));
  if (pid == 0) {  // the child: async-signal-safe calls only
    // Note [Signals reach a rank once]: a process group of its own, so a terminal's Ctrl-C
    // reaches the launcher alone, which passes it on once (a rank that got it twice would
    // take the second as "stop at once", train/stop_signals.h); and SIGTERM when the
    // launcher dies, so no rank trains on without it.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != launcher) ::_exit(128 + SIGTERM);  // it died before the line above
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::execve(program.c_str(), argv.data(), envp.data());
    static const char message[] = "launch: execve failed\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, message, sizeof message - 1);
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  ::fcntl(pipe_fds[0], F_SETFL, ::fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);
  return {.rank = o.node_rank * o.nproc_per_node + local_rank, .pid = pid, .output = pipe_fds[0]};
}

// Passes whole lines on, prefixed; at end of file the unfinished one too.
void read_output(Rank& r, const std::function<void(const std::string&)>& on_line) {
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(r.output, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: later
    if (n > 0) r.partial.append(buffer, static_cast<size_t>(n));
    size_t newline;
    while ((newline = r.partial.find('\n')) != std::string::npos) {
      on_line("[rank " + std::to_string(r.rank) + "] " + r.partial.substr(0, newline));
      r.partial.erase(0, newline + 1);
    }
    if (n == 0) {
      if (!r.partial.empty()) on_line("[rank " + std::to_string(r.rank) + "] " + r.partial);
      r.partial.clear();
      ::close(r.output);
      r.output = -1;
      return;
    }
  }
}

std::string describe_exit(int64_t rank, int status) {
  if (WIFSIGNALED(status))
    return "rank " + std::to_string(rank) + " was killed by signal " + std::to_string(WTERMSIG(status)) +
           " (" + ::strsignal(WTERMSIG(status)) + ")";
  return "rank " + std::to_string(rank) + " exited with code " + std::to_string(WEXITSTATUS(status));
}

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

}  // namespace

LaunchResult launch(const LaunchOptions& o) {
  KILN_CHECK(o.nproc_per_node >= 1 && o.nproc_per_node <= 4096, "launch: --nproc-per-node is ",
             o.nproc_per_node, "; it must be 1..4096");
  KILN_CHECK(o.nnodes >= 1 && o.node_rank >= 0 && o.node_rank < o.nnodes, "launch: --node-rank ", o.node_rank,
             " is outside 0..", o.nnodes - 1);
  KILN_CHECK(!o.command.empty() && !o.command[0].empty(), "launch: no program to run");
  const std::optional<int64_t> world_size = checked_mul(o.nproc_per_node, o.nnodes);
  KILN_CHECK(world_size && *world_size <= (int64_t{1} << 24), "launch: ", o.nproc_per_node,
             " processes on each of ", o.nnodes, " machines is too many");
  const int64_t world = *world_size;
  const std::string program = resolve_program(o.command[0]);
  const auto on_line =
      o.on_line ? o.on_line : [](const std::string& line) { std::cout << line << std::endl; };

  SignalForwarding signals(o.forward_signals);
  std::vector<Rank> ranks;
  LaunchResult result;
  std::optional<Clock::time_point> first_failure_at;  // when the first failed rank was reaped
  std::optional<Clock::time_point> kill_at;           // set once the job is being torn down
  std::vector<int> forwarded;                         // the signals passed on to the ranks
  const auto tear_down = [&] {
    if (kill_at) return;
    kill_at = Clock::now() + o.kill_grace;
    for (const Rank& r : ranks)
      if (!r.status) ::kill(r.pid, SIGTERM);
  };
  try {
    for (int64_t local = 0; local < o.nproc_per_node; ++local)
      ranks.push_back(start(o, program, local, world));
  } catch (const Error&) {
    tear_down();
    for (const Rank& r : ranks) {
      ::kill(r.pid, SIGKILL);
      ::waitpid(r.pid, nullptr, 0);
      ::close(r.output);
    }
    throw;
  }

  while (true) {
    std::vector<pollfd> fds;
    for (const Rank& r : ranks)
      if (r.output >= 0) fds.push_back({.fd = r.output, .events = POLLIN, .revents = 0});
    if (signals.fd() >= 0) fds.push_back({.fd = signals.fd(), .events = POLLIN, .revents = 0});
    ::poll(fds.data(), fds.size(), 50);
    if (signals.fd() >= 0) {
      unsigned char signal_number;
      while (::read(signals.fd(), &signal_number, 1) == 1) {
        forwarded.push_back(signal_number);
        for (const Rank& r : ranks)
          if (!r.status) ::kill(r.pid, signal_number);
      }
    }
    for (Rank& r : ranks)
      if (r.output >= 0) read_output(r, on_line);
    bool all_exited = true;
    for (Rank& r : ranks) {
      if (!r.status) {
        int status = 0;
        if (::waitpid(r.pid, &status, WNOHANG) == r.pid) r.status = status;
      }
      if (!r.status) {
        all_exited = false;
        continue;
      }
      if (*r.status != 0 && !answers_forwarded(*r.status, forwarded) && !first_failure_at)
        first_failure_at = Clock::now();
    }
    // Note [Which failure]: when one rank crashes its peers fail too, a moment later, and
    // may even be reaped first (a dying process closes its sockets before it can be
    // reaped). So failures are collected for a moment before one is reported: a rank
    // killed by a signal is the likely cause, otherwise the lowest failed rank.
    if (first_failure_at && !kill_at && Clock::now() - *first_failure_at >= kFailureWindow) {
      const Rank* chosen = nullptr;
      for (const Rank& r : ranks) {
        // A rank that stopped for a forwarded signal is not the failure (a real one is).
        if (!r.status || *r.status == 0 || answers_forwarded(*r.status, forwarded)) continue;
        if (chosen == nullptr || (WIFSIGNALED(*r.status) && !WIFSIGNALED(*chosen->status))) chosen = &r;
      }
      result.failed_rank = chosen->rank;
      result.exit_code = exit_code_of(*chosen->status);
      result.failure = describe_exit(chosen->rank, *chosen->status);
      tear_down();
    }
    if (kill_at && Clock::now() >= *kill_at)
      for (const Rank& r : ranks)
        if (!r.status) ::kill(r.pid, SIGKILL);
    if (all_exited && (!first_failure_at || kill_at)) break;
  }
  // The ranks stopped for a forwarded signal, and none failed otherwise: the job's code is theirs.
  for (const Rank& r : ranks) {
    if (result.exit_code != 0 || !r.status || !answers_forwarded(*r.status, forwarded)) continue;
    result.exit_code = exit_code_of(*r.status);
    result.failure = "the ranks stopped for the " + signal_name(forwarded.back()) + " passed on to them (" +
                     describe_exit(r.rank, *r.status) + ")";
  }
  // Output still buffered in the pipes (a rank's own children may hold them open: bounded).
  const auto drain_until = Clock::now() + std::chrono::milliseconds(500);
  for (Rank& r : ranks) {
    while (r.output >= 0 && Clock::now() < drain_until) {
      pollfd p{.fd = r.output, .events = POLLIN, .revents = 0};
      ::poll(&p, 1, 50);
      read_output(r, on_line);
    }
    if (r.output >= 0) ::close(r.output);
  }
  return result;
}

}  // namespace kiln::dist
