// kiln_host_cost: what the host pays to dispatch one small op, with and without autograd
// recording, on the CPU backend and (with --device cuda) the CUDA backend.
//
// The tensors are tiny (16 elements; a 4^3 volume for the convolution), so the kernel's own
// work is a few nanoseconds and the time per call is the framework around it: argument
// checks, type promotion, the output's allocation, the backend call, and with grad mode on
// the autograd node. One case runs `--calls` ops back to back, `--rounds` times; the line
// gives the median and the fastest round in nanoseconds per op. On a GPU the loop ends with
// one synchronize, so the time is the host's launch rate as long as each kernel is shorter
// than the host's work for it (true for these sizes: a few microseconds either way; the
// line says which device it ran on).
//
//   kiln_host_cost [--device cpu|cuda] [--case NAME|all] [--grad 0|1|both]
//                  [--calls N] [--rounds N] [--list 1]
//
// One JSON line per (case, grad): {"case", "device", "grad", "calls", "median_ns", "min_ns"}.
// compare_host_cost.py runs it beside PyTorch's twin (host_cost_pytorch.py) and, with
// --callgrind, counts instructions per op (deterministic on a loaded machine).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace {

using namespace kiln;

struct Settings {
  std::string device = "cpu";
  std::string only = "all";
  int grad = -1;  // -1: both
  int64_t calls = 20000;
  int64_t rounds = 7;
  bool list = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "kiln_host_cost: %s\nusage: kiln_host_cost [--device cpu|cuda] [--case NAME|all] "
               "[--grad 0|1|both] [--calls N] [--rounds N] [--list 1]\n",
               why);
  std::exit(2);
}

int64_t positive(const char* text) {
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value < 1) usage("expected a positive integer");
  return value;
}

Settings parse(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 == argc) usage(("missing a value after " + flag).c_str());
    const char* value = argv[++i];
    if (flag == "--device") {
      settings.device = value;
      if (settings.device != "cpu" && settings.device != "cuda") usage("--device is cpu or cuda");
    } else if (flag == "--case") {
      settings.only = value;
    } else if (flag == "--grad") {
      const std::string grad = value;
      if (grad != "0" && grad != "1" && grad != "both") usage("--grad is 0, 1 or both");
      settings.grad = grad == "both" ? -1 : grad == "1";
    } else if (flag == "--calls") {
      settings.calls = positive(value);
    } else if (flag == "--rounds") {
      settings.rounds = positive(value);
    } else if (flag == "--list") {
      settings.list = std::strcmp(value, "0") != 0;
    } else {
      usage(("unknown flag " + flag).c_str());
    }
  }
  return settings;
}

// The operands of every case, made once: float32 [4, 4] matrices, a [4] row to broadcast,
// and a 4^3 single-channel volume with a 3^3 filter. With grad on they require grad, so
// each op records a node (which the loop then drops, as a discarded forward does).
struct Operands {
  Tensor a, b, row, volume, filter;
};

Operands make_operands(Device device, bool requires_grad) {
  Generator generator(7);
  const TensorOptions options{.dtype = DType::Float32, .device = device};
  Operands operands{randn({4, 4}, options, &generator), randn({4, 4}, options, &generator),
                    randn({4}, options, &generator), randn({1, 1, 4, 4, 4}, options, &generator),
                    randn({1, 1, 3, 3, 3}, options, &generator)};
  for (Tensor* t : {&operands.a, &operands.b, &operands.row, &operands.volume, &operands.filter})
    t->requires_grad_(requires_grad);
  return operands;
}

struct Case {
  const char* name;
  std::function<Tensor(const Operands&)> op;
};

// The cases: the families the issue names (elementwise, reductions, a view, a conv call).
// compare_host_cost.py matches them by name with host_cost_pytorch.py's.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"add", [](const Operands& o) { return add(o.a, o.b); }},
      {"add_broadcast", [](const Operands& o) { return add(o.a, o.row); }},
      {"mul_scalar", [](const Operands& o) { return mul(o.a, 2.0); }},
      {"relu", [](const Operands& o) { return relu(o.a); }},
      {"sum", [](const Operands& o) { return sum(o.a); }},
      {"mean_dim", [](const Operands& o) { return mean(o.a, {1}); }},
      {"view", [](const Operands& o) { return view(o.a, {16}); }},
      {"transpose", [](const Operands& o) { return transpose(o.a, 0, 1); }},
      {"conv3d", [](const Operands& o) { return conv3d(o.volume, o.filter, {}, {1, 1, 1}, {1, 1, 1}); }},
  };
  return all;
}

void synchronize_if_cuda(Device device) {
  if (device.is_cuda()) Stream::current(device).synchronize();
}

// Nanoseconds per op of each round; the first round is a warm-up and is not kept.
std::vector<double> time_rounds(const Case& c, const Operands& operands, Device device, const Settings& settings) {
  std::vector<double> per_op;
  for (int64_t round = 0; round <= settings.rounds; ++round) {
    synchronize_if_cuda(device);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < settings.calls; ++i) {
      Tensor out = c.op(operands);
      (void)out;
    }
    synchronize_if_cuda(device);
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    if (round > 0) per_op.push_back(ns / static_cast<double>(settings.calls));
  }
  return per_op;
}

void run_case(const Case& c, Device device, bool grad, const Settings& settings) {
  const Operands operands = make_operands(device, grad);
  std::vector<double> per_op = time_rounds(c, operands, device, settings);
  std::sort(per_op.begin(), per_op.end());
  std::printf("{\"case\": \"%s\", \"device\": \"%s\", \"grad\": %s, \"calls\": %lld, \"median_ns\": %.1f, "
              "\"min_ns\": %.1f}\n",
              c.name, device.is_cuda() ? "cuda" : "cpu", grad ? "true" : "false",
              static_cast<long long>(settings.calls), per_op[per_op.size() / 2], per_op.front());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Settings settings = parse(argc, argv);
  if (settings.list) {
    for (const Case& c : cases()) std::printf("%s\n", c.name);
    return 0;
  }
  try {
    init();
    if (settings.device == "cuda" && !cuda_is_available()) {
      std::fprintf(stderr, "kiln_host_cost: --device cuda, but CUDA is not available here\n");
      return 3;
    }
    const Device device = settings.device == "cuda" ? Device::cuda() : Device::cpu();
    bool matched = false;
    for (const Case& c : cases()) {
      if (settings.only != "all" && settings.only != c.name) continue;
      matched = true;
      for (const bool grad : {false, true})
        if (settings.grad < 0 || settings.grad == static_cast<int>(grad)) run_case(c, device, grad, settings);
    }
    if (!matched) usage(("no case named " + settings.only + " (--list 1 lists them)").c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "kiln_host_cost: %s\n", e.what());
    return 1;
  }
  return 0;
}
