// Two simulated machines: two network namespaces joined by a veth pair (iproute2), one
// `launch` per "machine" with two ranks each, --nnodes 2, the master on the first
// machine's veth address. Rendezvous and every collective (kiln_dist_worker's
// "collectives") then cross a real network interface rather than the loopback. Needs the
// privileges to create namespaces (root with CAP_NET_ADMIN); skips, saying so, without
// them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "dist/launcher.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

bool run(const std::string& command) { return std::system((command + " > /dev/null 2>&1").c_str()) == 0; }

// Two namespaces and the veth pair between them, removed when it goes.
class TwoNamespaces {
 public:
  TwoNamespaces() : a_("kiln_a_" + std::to_string(::getpid())), b_("kiln_b_" + std::to_string(::getpid())) {}
  ~TwoNamespaces() {
    run("ip netns del " + a_);
    run("ip netns del " + b_);
  }
  // Creates them; false when this process may not.
  bool create() {
    if (!run("ip netns add " + a_) || !run("ip netns add " + b_)) return false;
    const std::string va = "kva" + std::to_string(::getpid() % 100000),
                      vb = "kvb" + std::to_string(::getpid() % 100000);
    return run("ip link add " + va + " type veth peer name " + vb) &&
           run("ip link set " + va + " netns " + a_) && run("ip link set " + vb + " netns " + b_) &&
           run("ip -n " + a_ + " addr add 10.199.0.1/24 dev " + va) &&
           run("ip -n " + b_ + " addr add 10.199.0.2/24 dev " + vb) &&
           run("ip -n " + a_ + " link set " + va + " up") && run("ip -n " + b_ + " link set " + vb + " up") &&
           run("ip -n " + a_ + " link set lo up") && run("ip -n " + b_ + " link set lo up");
  }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }

 private:
  std::string a_, b_;
};

TEST(TwoMachines, RendezvousAndEveryCollectiveCrossAVethPair) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (CAP_NET_ADMIN) to create network namespaces";
  TwoNamespaces machines;
  if (!machines.create())
    GTEST_SKIP() << "cannot create network namespaces and a veth pair here (ip netns/ip link failed: no "
                    "CAP_NET_ADMIN in this container, or no iproute2)";
  testing::with_watchdog(std::chrono::seconds(120), [&] {
    std::mutex mutex;
    std::vector<std::string> lines;
    std::vector<dist::LaunchResult> results(2);
    std::vector<std::thread> nodes;
    for (int node = 0; node < 2; ++node) {
      nodes.emplace_back([&, node] {
        results[static_cast<size_t>(node)] =
            dist::launch({.nproc_per_node = 2,
                          .nnodes = 2,
                          .node_rank = node,
                          .master_addr = "10.199.0.1",
                          .master_port = 29555,
                          .command = {"ip", "netns", "exec", node == 0 ? machines.a() : machines.b(),
                                      KILN_DIST_WORKER, "collectives"},
                          .on_line =
                              [&](const std::string& line) {
                                std::lock_guard<std::mutex> lock(mutex);
                                lines.push_back(line);
                              },
                          .kill_grace = std::chrono::seconds(5)});
      });
    }
    for (std::thread& t : nodes) t.join();
    std::string output;
    for (const std::string& line : lines) output += line + "\n";
    SCOPED_TRACE(output);
    EXPECT_EQ(results[0].exit_code, 0) << results[0].failure;
    EXPECT_EQ(results[1].exit_code, 0) << results[1].failure;
    for (int rank = 0; rank < 4; ++rank) {
      const std::string ok = "[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) + ": ok";
      EXPECT_NE(output.find(ok), std::string::npos) << ok;
    }
  });
}

}  // namespace
}  // namespace kiln
