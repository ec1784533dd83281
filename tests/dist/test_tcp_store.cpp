// TCPStore (dist/tcp_store.h) on the loopback address, every test under a watchdog so a
// hang fails instead of stalling CI: set/get/add/compare_set/delete/num_keys as
// torch.distributed defines them; get and wait block until another client sets the keys;
// timeouts name the keys still missing; a counter added to from many threads and clients
// at once is exact; clients that start before the server connect once it is up; the
// master waits for world_size clients; a server that goes away is an error on every
// client, not a hang; malformed requests drop only their sender.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "dist/socket.h"
#include "dist/tcp_store.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using dist::TCPStore;
using dist::TCPStoreOptions;
using namespace std::chrono_literals;

constexpr auto kLimit = std::chrono::seconds(60);

std::unique_ptr<TCPStore> master(std::chrono::milliseconds timeout = 5s) {
  return std::make_unique<TCPStore>(TCPStoreOptions{.port = 0, .is_master = true, .timeout = timeout});
}

std::unique_ptr<TCPStore> client(uint16_t port, std::chrono::milliseconds timeout = 5s) {
  return std::make_unique<TCPStore>(TCPStoreOptions{.port = port, .timeout = timeout});
}

// A port nothing listens on: one the system handed out, closed again.
uint16_t free_port() {
  const dist::Socket probe = dist::Socket::listen("127.0.0.1", 0);
  return probe.port();
}

TEST(TCPStore, SetGetAddCompareSetDelete) {
  testing::with_watchdog(kLimit, [] {
    auto server = master();
    auto other = client(server->port());
    server->set("a", "1");
    EXPECT_EQ(other->get("a"), "1");
    other->set("bytes", std::string("\0\xff\n", 3));
    EXPECT_EQ(server->get("bytes"), std::string("\0\xff\n", 3));
    EXPECT_EQ(other->add("n", 5), 5);
    EXPECT_EQ(server->add("n", -2), 3);
    EXPECT_EQ(other->get("n"), "3");
    EXPECT_EQ(other->add("a", 1), 2);  // a set decimal value counts on
    EXPECT_KILN_ERROR(server->add("bytes", 1), "add: the value of 'bytes' is not an integer");
    // compare_set: torch.distributed's rules.
    EXPECT_EQ(other->compare_set("c", "", "x"), "x");   // absent, expected empty: set
    EXPECT_EQ(other->compare_set("d", "y", "z"), "y");  // absent, expected given: unchanged
    EXPECT_EQ(other->compare_set("c", "x", "w"), "w");  // matches: set
    EXPECT_EQ(other->compare_set("c", "x", "v"), "w");  // does not match: the current value
    EXPECT_EQ(server->num_keys(), 4);                   // a, bytes, n, c
    EXPECT_TRUE(other->delete_key("c"));
    EXPECT_FALSE(other->delete_key("c"));
    EXPECT_EQ(server->num_keys(), 3);
  });
}

TEST(TCPStore, GetAndWaitBlockUntilAnotherClientSetsTheKeys) {
  testing::with_watchdog(kLimit, [] {
    auto server = master();
    auto waiter = client(server->port());
    std::thread setter([port = server->port()] {
      auto late = client(port);
      std::this_thread::sleep_for(100ms);
      late->set("rank/1", "ready");
      std::this_thread::sleep_for(50ms);
      late->set("rank/2", "ready");
    });
    const auto start = dist::Clock::now();
    EXPECT_EQ(waiter->get("rank/1"), "ready");
    waiter->wait({"rank/1", "rank/2"});
    EXPECT_GE(dist::Clock::now() - start, 140ms);
    setter.join();
  });
}

TEST(TCPStore, TimeoutsNameTheKeysStillMissing) {
  testing::with_watchdog(kLimit, [] {
    auto server = master(300ms);
    server->set("rank/0", "here");
    const auto start = dist::Clock::now();
    EXPECT_KILN_ERROR(server->get("rank/3"), "get('rank/3') timed out after 300 ms",
                      "no process set the key");
    EXPECT_LT(dist::Clock::now() - start, 3s);
    EXPECT_KILN_ERROR(server->wait({"rank/0", "rank/1", "rank/2"}, 200ms), "wait timed out after 200 ms",
                      "still missing 2 of 3 keys: 'rank/1', 'rank/2'");
    server->set("rank/1", "late");  // the store still works after a timeout
    EXPECT_EQ(server->get("rank/1"), "late");
  });
}

TEST(TCPStore, ACounterIsExactUnderConcurrentAdds) {
  testing::with_watchdog(kLimit, [] {
    auto server = master();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([port = server->port()] {
        auto c = client(port);
        for (int i = 0; i < 250; ++i) c->add("count", 1);
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(server->add("count", 0), 1000);
  });
}

TEST(TCPStore, ClientsMayStartBeforeTheServerAndTheMasterWaitsForWorldSize) {
  testing::with_watchdog(kLimit, [] {
    const uint16_t port = free_port();
    std::atomic<bool> connected{false};
    std::thread early([&] {
      auto c = client(port);
      connected = true;
      c->set("early", "1");
    });
    std::this_thread::sleep_for(150ms);
    EXPECT_FALSE(connected);
    TCPStore server(TCPStoreOptions{.port = port, .world_size = 2, .is_master = true, .timeout = 5s});
    EXPECT_EQ(server.get("early"), "1");
    early.join();
    EXPECT_KILN_ERROR(
        TCPStore(TCPStoreOptions{.port = 0, .world_size = 3, .is_master = true, .timeout = 200ms}),
        "only 1 of 3 processes connected", "within the timeout of 200 ms");
    EXPECT_KILN_ERROR(client(port == 65535 ? 65534 : port + 1, 200ms), "cannot connect",
                      "before the timeout");
  });
}

TEST(TCPStore, AServerThatGoesAwayIsAnErrorNotAHang) {
  testing::with_watchdog(kLimit, [] {
    auto server = master(30s);
    auto c = client(server->port(), 30s);
    c->set("k", "v");
    std::thread waiting([&] {
      const auto start = dist::Clock::now();
      EXPECT_KILN_ERROR(c->get("never"), "TCPStore at", "closed the connection", "still running?");
      EXPECT_LT(dist::Clock::now() - start, 10s);  // promptly, not at the 30 s timeout
    });
    std::this_thread::sleep_for(100ms);
    server.reset();
    waiting.join();
    EXPECT_KILN_ERROR(c->set("k", "v"), "TCPStore at");
  });
}

TEST(TCPStore, AMalformedRequestDropsOnlyItsSender) {
  testing::with_watchdog(kLimit, [] {
    auto server = master();
    dist::Socket raw = dist::Socket::connect("127.0.0.1", server->port(), dist::Deadline::after(2s));
    raw.send_frame(std::string("\x63junk", 5), dist::Deadline::after(2s));  // an unknown op
    EXPECT_THROW(raw.recv_frame(dist::Deadline::after(2s)), Error);         // dropped: closed
    dist::Socket huge = dist::Socket::connect("127.0.0.1", server->port(), dist::Deadline::after(2s));
    const unsigned char header[4] = {0xff, 0xff, 0xff, 0xff};  // a 4 GiB frame announced
    huge.send_all(header, 4, dist::Deadline::after(2s));
    EXPECT_THROW(huge.recv_frame(dist::Deadline::after(2s)), Error);
    server->set("still", "works");
    EXPECT_EQ(client(server->port())->get("still"), "works");
  });
}

}  // namespace
}  // namespace kiln
