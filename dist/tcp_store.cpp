// TCPStore (tcp_store.h): the client calls, the wire format (Note [Store protocol]) and
// the server, one thread polling the listening socket, a wake-up pipe and every client.
#include "dist/tcp_store.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <map>
#include <thread>

#include "core/error.h"

namespace kiln::dist {
namespace {

enum class Op : uint8_t { Set = 1, Get, Add, CompareSet, Wait, Delete, NumKeys };
enum class Status : uint8_t { Ok = 0, Timeout = 1, Error = 2 };

// A frame's fields, written and read in order (Note [Store protocol]).
struct Writer {
  std::string bytes;
  Writer& u8(uint8_t v) {
    bytes.push_back(static_cast<char>(v));
    return *this;
  }
  Writer& i64(int64_t v) {
    for (int i = 0; i < 8; ++i)
      bytes.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xFF));
    return *this;
  }
  Writer& str(const std::string& v) {
    i64(static_cast<int64_t>(v.size()));
    bytes += v;
    return *this;
  }
};

struct Reader {
  const std::string& bytes;
  size_t at = 0;
  const uint8_t* take(size_t n) {
    KILN_CHECK(n <= bytes.size() - at, "TCPStore: a message ends early (", bytes.size(), " bytes)");
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data() + at);
    at += n;
    return p;
  }
  uint8_t u8() { return *take(1); }
  int64_t i64() {
    const uint8_t* p = take(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return static_cast<int64_t>(v);
  }
  std::string str() {
    const int64_t n = i64();
    KILN_CHECK(n >= 0 && static_cast<uint64_t>(n) <= bytes.size() - at, "TCPStore: a string of ", n,
               " bytes runs past its message");
    const uint8_t* p = take(static_cast<size_t>(n));
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  }
};

std::string quoted_list(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  return out;
}

constexpr auto kGrace = std::chrono::seconds(5);  // a client waits this long past the server's answer time

}  // namespace

// ---- the server ---------------------------------------------------------------------------

class TCPStore::Server {
 public:
  Server(const std::string& host, uint16_t port) : listener_(Socket::listen(host, port)) {
    KILN_CHECK(::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) == 0,
               "TCPStore: cannot make the server's wake-up pipe");
    thread_ = std::thread([this] { run(); });
  }
  ~Server() {
    stop_ = true;
    const char byte = 1;
    (void)!::write(wake_[1], &byte, 1);
    thread_.join();
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  uint16_t port() const { return listener_.port(); }
  int64_t connected() const { return connected_; }

 private:
  struct Client {
    Socket socket;
    std::string inbox;
  };
  struct Waiter {
    int fd;
    Op op;
    std::vector<std::string> keys;
    Clock::time_point deadline;
  };

  void run();
  void drop(int fd) {
    clients_.erase(fd);
    std::erase_if(waiters_, [fd](const Waiter& w) { return w.fd == fd; });
  }
  void reply(int fd, const std::string& frame) {
    const auto it = clients_.find(fd);
    if (it == clients_.end()) return;
    try {
      it->second.socket.send_frame(frame, Deadline::after(std::chrono::seconds(10)));
    } catch (const Error&) {
      drop(fd);  // a client that does not read its answers is gone
    }
  }
  void handle(int fd, const std::string& frame);
  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const std::string& k : keys) {
      if (!data_.contains(k)) out.push_back(k);
    }
    return out;
  }
  // Answers every waiter whose keys are all set, and, with `now`, every one past its deadline.
  void serve_waiters(std::optional<Clock::time_point> now);

  Socket listener_;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> connected_{0};
  std::map<int, Client> clients_;
  std::map<std::string, std::string> data_;
  std::vector<Waiter> waiters_;
};

void TCPStore::Server::serve_waiters(std::optional<Clock::time_point> now) {
  std::vector<Waiter> still;
  std::vector<std::pair<int, std::string>> answers;
  for (Waiter& w : waiters_) {
    const std::vector<std::string> absent = missing(w.keys);
    if (absent.empty()) {
      Writer out;
      out.u8(static_cast<uint8_t>(Status::Ok));
      if (w.op == Op::Get) out.str(data_.at(w.keys[0]));
      answers.emplace_back(w.fd, std::move(out.bytes));
    } else if (now && *now >= w.deadline) {
      Writer out;
      out.u8(static_cast<uint8_t>(Status::Timeout)).i64(static_cast<int64_t>(absent.size()));
      for (const std::string& k : absent) out.str(k);
      answers.emplace_back(w.fd, std::move(out.bytes));
    } else {
      still.push_back(std::move(w));
    }
  }
  waiters_ = std::move(still);
  for (const auto& [fd, frame] : answers) reply(fd, frame);
}

void TCPStore::Server::handle(int fd, const std::string& frame) {
  Reader in{frame};
  const auto op = static_cast<Op>(in.u8());
  Writer out;
  out.u8(static_cast<uint8_t>(Status::Ok));
  switch (op) {
    case Op::Set: {
      const std::string key = in.str();
      data_[key] = in.str();
      break;
    }
    case Op::Get:
    case Op::Wait: {
      std::vector<std::string> keys;
      if (op == Op::Get) {
        keys.push_back(in.str());
      } else {
        const int64_t n = in.i64();
        KILN_CHECK(n >= 0 && n <= (1 << 20), "TCPStore: a wait for ", n, " keys");
        for (int64_t i = 0; i < n; ++i) keys.push_back(in.str());
      }
      const int64_t wait_ms = in.i64();
      waiters_.push_back(
          {.fd = fd,
           .op = op,
           .keys = std::move(keys),
           .deadline = Clock::now() + std::chrono::milliseconds(std::max<int64_t>(wait_ms, 0))});
      serve_waiters(std::nullopt);
      return;
    }
    case Op::Add: {
      const std::string key = in.str();
      const int64_t delta = in.i64();
      int64_t value = 0;
      if (const auto it = data_.find(key); it != data_.end()) {
        const std::string& text = it->second;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec != std::errc() || end != text.data() + text.size()) {
          Writer error;
          error.u8(static_cast<uint8_t>(Status::Error))
              .str("add: the value of '" + key + "' is not an integer");
          reply(fd, error.bytes);
          return;
        }
      }
      value += delta;
      data_[key] = std::to_string(value);
      out.i64(value);
      break;
    }
    case Op::CompareSet: {  // torch.distributed's semantics, absent keys included
      const std::string key = in.str();
      const std::string expected = in.str();
      const std::string desired = in.str();
      const auto it = data_.find(key);
      if (it == data_.end()) {
        if (expected.empty()) data_[key] = desired;
        out.str(expected.empty() ? desired : expected);
      } else {
        if (it->second == expected) it->second = desired;
        out.str(it->second);
      }
      break;
    }
    case Op::Delete:
      out.u8(data_.erase(in.str()) > 0 ? 1 : 0);
      break;
    case Op::NumKeys:
      out.i64(static_cast<int64_t>(data_.size()));
      break;
    default:
      KILN_CHECK(false, "TCPStore: unknown request ", static_cast<int>(op));
  }
  reply(fd, out.bytes);
  if (op == Op::Set || op == Op::Add || op == Op::CompareSet) serve_waiters(std::nullopt);
}

void TCPStore::Server::run() {
  while (!stop_) {
    std::vector<pollfd> fds = {{.fd = listener_.fd(), .events = POLLIN, .revents = 0},
                               {.fd = wake_[0], .events = POLLIN, .revents = 0}};
    for (const auto& [fd, client] : clients_) fds.push_back({.fd = fd, .events = POLLIN, .revents = 0});
    Deadline next = Deadline::after(std::chrono::seconds(1));
    for (const Waiter& w : waiters_) next.at = std::min(next.at, w.deadline);
    if (::poll(fds.data(), fds.size(), next.remaining_ms()) < 0) continue;  // EINTR
    if (stop_) break;
    if (fds[0].revents != 0) {
      while (true) {
        Socket client = listener_.accept(Deadline::after(std::chrono::milliseconds(0)));
        if (!client.valid()) break;
        const int fd = client.fd();
        clients_.emplace(fd, Client{.socket = std::move(client), .inbox = {}});
        ++connected_;
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int fd = fds[i].fd;
      const auto it = clients_.find(fd);
      if (it == clients_.end()) continue;
      std::string& inbox = it->second.inbox;
      const bool open = it->second.socket.read_available(inbox);
      try {
        while (inbox.size() >= 4) {  // every whole frame that has arrived
          const uint32_t n = static_cast<uint8_t>(inbox[0]) | (static_cast<uint8_t>(inbox[1]) << 8) |
                             (static_cast<uint8_t>(inbox[2]) << 16) |
                             (static_cast<uint32_t>(static_cast<uint8_t>(inbox[3])) << 24);
          KILN_CHECK(n <= Socket::kMaxFrame, "TCPStore: a frame of ", n, " bytes");
          if (inbox.size() < 4 + static_cast<size_t>(n)) break;
          const std::string frame = inbox.substr(4, n);
          inbox.erase(0, 4 + static_cast<size_t>(n));
          handle(fd, frame);
          if (!clients_.contains(fd)) break;
        }
      } catch (const Error&) {
        drop(fd);  // a malformed request: the client is not one of ours
        continue;
      }
      if (!open) drop(fd);
    }
    serve_waiters(Clock::now());
  }
}

// ---- the client ---------------------------------------------------------------------------

TCPStore::TCPStore(const TCPStoreOptions& options) : timeout_(options.timeout) {
  KILN_CHECK(options.timeout.count() > 0, "TCPStore: the timeout must be positive");
  KILN_CHECK(!options.world_size || *options.world_size > 0, "TCPStore: world_size must be positive, got ",
             options.world_size.value_or(0));
  std::string host = options.host_name;
  port_ = options.port;
  if (options.is_master) {
    server_ = std::make_unique<Server>(host, options.port);
    port_ = server_->port();
  }
  endpoint_ = host + ":" + std::to_string(port_);
  socket_ = Socket::connect(host, port_, Deadline::after(timeout_));
  if (server_ && options.world_size && options.wait_for_workers) {
    const Deadline deadline = Deadline::after(timeout_);
    while (server_->connected() < *options.world_size) {
      KILN_CHECK(!deadline.passed(), "TCPStore: only ", server_->connected(), " of ", *options.world_size,
                 " processes connected to ", endpoint_, " within the timeout of ", timeout_.count(), " ms");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

TCPStore::~TCPStore() = default;

std::string TCPStore::request(const std::string& frame, std::chrono::milliseconds wait) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Deadline deadline = Deadline::after(wait + kGrace);
  try {
    socket_.send_frame(frame, deadline);
    std::string answer = socket_.recv_frame(deadline);
    KILN_CHECK(!answer.empty(), "TCPStore: an empty answer from ", endpoint_);
    return answer;
  } catch (const Error& e) {
    KILN_CHECK(false, "TCPStore at ", endpoint_, ": ", e.what(),
               " (is the store's server, rank 0, still running?)");
    return {};
  }
}

void TCPStore::set(const std::string& key, const std::string& value) {
  request(Writer().u8(static_cast<uint8_t>(Op::Set)).str(key).str(value).bytes, timeout_);
}

std::string TCPStore::get(const std::string& key) {
  const std::string answer =
      request(Writer().u8(static_cast<uint8_t>(Op::Get)).str(key).i64(timeout_.count()).bytes, timeout_);
  Reader in{answer};
  KILN_CHECK(static_cast<Status>(in.u8()) == Status::Ok, "TCPStore at ", endpoint_, ": get('", key,
             "') timed out after ", timeout_.count(), " ms: no process set the key");
  return in.str();
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  const std::string answer =
      request(Writer().u8(static_cast<uint8_t>(Op::Add)).str(key).i64(delta).bytes, timeout_);
  Reader in{answer};
  if (static_cast<Status>(in.u8()) != Status::Ok)
    KILN_CHECK(false, "TCPStore at ", endpoint_, ": ", in.str());
  return in.i64();
}

std::string TCPStore::compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  const std::string answer = request(
      Writer().u8(static_cast<uint8_t>(Op::CompareSet)).str(key).str(expected).str(desired).bytes, timeout_);
  Reader in{answer};
  in.u8();
  return in.str();
}

void TCPStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Writer out;
  out.u8(static_cast<uint8_t>(Op::Wait)).i64(static_cast<int64_t>(keys.size()));
  for (const std::string& k : keys) out.str(k);
  out.i64(timeout.count());
  const std::string answer = request(out.bytes, timeout);
  Reader in{answer};
  if (static_cast<Status>(in.u8()) == Status::Ok) return;
  std::vector<std::string> missing(static_cast<size_t>(std::max<int64_t>(in.i64(), 0)));
  for (std::string& k : missing) k = in.str();
  KILN_CHECK(false, "TCPStore at ", endpoint_, ": wait timed out after ", timeout.count(),
             " ms; still missing ", missing.size(), " of ", keys.size(), " keys: ", quoted_list(missing));
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  Writer out;
  out.u8(static_cast<uint8_t>(Op::Wait)).i64(static_cast<int64_t>(keys.size()));
  for (const std::string& k : keys) out.str(k);
  out.i64(0);  // answered at once: Ok when all are set, Timeout otherwise
  const std::string answer = request(out.bytes, std::chrono::milliseconds(0));
  return static_cast<Status>(Reader{answer}.u8()) == Status::Ok;
}

bool TCPStore::delete_key(const std::string& key) {
  const std::string answer = request(Writer().u8(static_cast<uint8_t>(Op::Delete)).str(key).bytes, timeout_);
  Reader in{answer};
  in.u8();
  return in.u8() != 0;
}

int64_t TCPStore::num_keys() {
  const std::string answer = request(Writer().u8(static_cast<uint8_t>(Op::NumKeys)).bytes, timeout_);
  Reader in{answer};
  in.u8();
  return in.i64();
}

}  // namespace kiln::dist
