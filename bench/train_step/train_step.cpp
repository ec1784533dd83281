// kiln_train_step: times whole training steps of a bundled 3D model (nn/models/: the
// MedMNIST-style ResNet-18 or ResNet-50, or DenseNet-121, plain or memory-efficient) on the
// CPU or a GPU, the end-to-end figure the kernel benchmarks add up to.
//
// One step = forward, cross-entropy, backward, Adam (fused), zero_grad (to None): the loop
// of a real training run, on a fixed random batch. After --warmup untimed steps (the first
// allocates every buffer), --steps steps are timed one by one (on a GPU each step ends with
// a synchronize, so its time is the device's); the program prints one JSON
// object: each step's seconds, the median, samples/s at the median, and the process's
// peak resident memory (getrusage, the same measure compare_train_step.py takes of
// PyTorch's train_step_pytorch.py), the peaks of the CPU allocator's cache (blocks of
// 64 KiB and more: allocated by tensors, and reserved from the system), and the device
// allocator's peak over the timed steps (step_peak_allocated_mb: on the CPU the cache's,
// on a GPU the caching allocator's, PyTorch's torch.cuda.max_memory_allocated).
//
//   kiln_train_step [--model resnet18] (resnet50 | densenet121: DenseNet-121 with the
//                                       3x3x3 stride-1 stem up to 32^3, the 7x7x7 one above)
//                   [--memory-efficient 0] (1: DenseNet's memory-efficient mode)
//                   [--batch 8] [--side 28] [--steps 3] [--warmup 1] [--classes 11]
//                   [--fuse-bn-relu 1]   (0: batch norm and relu as two ops, and the ResNets'
//                                         block tails as batch norm, add and relu, to compare)
//                   [--channels-last 0]  (1: the model and the batch in NDHWC, as kiln train
//                                         --channels-last: Note [Channels-last training])
//                   [--cuda 0]           (1: on cuda:0, float32, cuDNN benchmark mode on)
//                   [--tf32 0]           (1: float32 convolutions and products may use TF32)
//                   [--loader 0]         (1: each step's batch comes from a DataLoader over
//                                         SyntheticShapes, 2 workers, pinned, through a
//                                         DevicePrefetcher; the JSON adds the loader's
//                                         times, copy_wait_s among them: Note [Copy waits])
//                   [--graphs 0]         (1: the step through train::GraphedStep, captured
//                                         after 2 eager steps and replayed: Note [A graphed
//                                         step]; at least 3 warm-up steps then)
//                   [--bf16 0]           (1: forward and loss under bfloat16 autocast)
//                   [--speed-of-light 0] (1: after the timed steps, one more eager step
//                                         measures the step's speed of light, Note [A
//                                         step's speed of light] in core/cudnn.h: its
//                                         convolutions' fastest searched times plus the
//                                         optimizer's bytes at a device copy peak measured
//                                         now; on the CPU it prints null and says why)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/cudnn.h"
#include "kiln/kiln.h"
#include "train/graphed_step.h"

namespace {

struct Settings {
  std::string model = "resnet18";
  int64_t memory_efficient = 0;
  int64_t batch = 8;
  int64_t side = 28;
  int64_t steps = 3;
  int64_t warmup = 1;
  int64_t classes = 11;
  int64_t fuse_bn_relu = 1;
  int64_t channels_last = 0;
  int64_t cuda = 0;
  int64_t tf32 = 0;
  int64_t loader = 0;
  int64_t graphs = 0;
  int64_t bf16 = 0;
  int64_t speed_of_light = 0;
};

Settings parse(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--model" && i + 1 < argc) {
      settings.model = argv[++i];
      continue;
    }
    int64_t* field = flag == "--batch"              ? &settings.batch
                     : flag == "--side"             ? &settings.side
                     : flag == "--steps"            ? &settings.steps
                     : flag == "--warmup"           ? &settings.warmup
                     : flag == "--classes"          ? &settings.classes
                     : flag == "--fuse-bn-relu"     ? &settings.fuse_bn_relu
                     : flag == "--channels-last"    ? &settings.channels_last
                     : flag == "--cuda"             ? &settings.cuda
                     : flag == "--tf32"             ? &settings.tf32
                     : flag == "--loader"           ? &settings.loader
                     : flag == "--graphs"           ? &settings.graphs
                     : flag == "--bf16"             ? &settings.bf16
                     : flag == "--memory-efficient" ? &settings.memory_efficient
                     : flag == "--speed-of-light"   ? &settings.speed_of_light
                                                    : nullptr;
    const bool is_switch = field == &settings.fuse_bn_relu || field == &settings.channels_last ||
                           field == &settings.cuda || field == &settings.tf32 || field == &settings.loader ||
                           field == &settings.memory_efficient || field == &settings.graphs ||
                           field == &settings.bf16 || field == &settings.speed_of_light;
    const int64_t least = field == &settings.warmup || is_switch ? 0 : 1;
    char* end = nullptr;
    if (field == nullptr || i + 1 == argc || (*field = std::strtoll(argv[i + 1], &end, 10)) < least ||
        *end != 0 || (is_switch && *field > 1)) {
      std::fprintf(stderr,
                   "usage: kiln_train_step [--model resnet18|resnet50|densenet121] [--memory-efficient 0|1] "
                   "[--batch N] [--side N] [--steps N] [--warmup N] [--classes N] [--fuse-bn-relu 0|1] "
                   "[--channels-last 0|1] "
                   "[--cuda 0|1] [--tf32 0|1] [--loader 0|1] [--graphs 0|1] [--bf16 0|1] "
                   "[--speed-of-light 0|1]\n");
      std::exit(2);
    }
    ++i;
  }
  if (settings.model != "resnet18" && settings.model != "resnet50" && settings.model != "densenet121") {
    std::fprintf(stderr, "kiln_train_step: --model must be resnet18, resnet50 or densenet121, got %s\n",
                 settings.model.c_str());
    std::exit(2);
  }
  return settings;
}

// The network of --model, for one input channel.
std::shared_ptr<kiln::nn::Layer> make_model(const Settings& s) {
  using namespace kiln::nn::models;
  const bool fused = s.fuse_bn_relu != 0;
  if (s.model == "densenet121") {
    return std::make_shared<DenseNet3d>(DenseNet3dOptions{
        .depth = 121,
        .num_classes = s.classes,
        .stem = s.side <= 32 ? DenseNet3dStem::SmallInput : DenseNet3dStem::Standard,
        .memory_efficient = s.memory_efficient != 0,
        .fused_bn_relu = fused});
  }
  return std::make_shared<ResNet3d>(
      ResNet3dOptions{.depth = s.model == "resnet50" ? 50 : 18, .num_classes = s.classes, .fused_bn_relu = fused});
}

// Bytes per second of a device-to-device copy of 512 MiB (read and write counted), the
// best of five rounds of ten copies, each round timed from the host around a synchronize.
double device_copy_peak(kiln::Device device) {
  using namespace kiln;
  constexpr int64_t kElements = int64_t{128} << 20;  // float32: 512 MiB
  constexpr int kCopies = 10;
  const Tensor source = randn({kElements}).to(device);
  Tensor destination = empty({kElements}, {.dtype = DType::Float32, .device = device});
  destination.copy_(source);
  synchronize(device);
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int copy = 0; copy < kCopies; ++copy) destination.copy_(source);
    synchronize(device);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * kCopies * static_cast<double>(source.numel() * 4) / seconds);
  }
  return best;
}

// The bytes no fusion removes from a step (Note [A step's speed of light]): each parameter
// read and written, its gradient read, and the optimizer's state read and written.
double optimizer_bytes(const std::vector<kiln::Tensor>& parameters, const kiln::optim::Optimizer& optimizer) {
  double bytes = 0;
  for (const kiln::Tensor& p : parameters) bytes += 3.0 * static_cast<double>(p.numel() * p.element_size());
  for (const kiln::Tensor& t : optimizer.persistent_tensors()) {
    bytes += 2.0 * static_cast<double>(t.numel() * t.element_size());
  }
  return bytes;
}

// `, "speed_of_light": {...}` for one more step run by `step` (eagerly, so its
// convolutions choose algorithms and are counted; Note [A step's speed of light]).
template <typename Step>
std::string speed_of_light_json(kiln::Device device, const Step& step, double median_s,
                                const std::vector<kiln::Tensor>& parameters, const kiln::optim::Optimizer& optimizer) {
  using namespace kiln;
  if (!device.is_cuda()) {
    return ", \"speed_of_light\": null, \"speed_of_light_why\": \"cuDNN's searched times are a GPU's; the CPU has "
           "none\"";
  }
  cudnn::reset_stats();
  step();
  synchronize(device);
  double conv_ms = 0;
  int64_t calls = 0, keys = 0, untimed_keys = 0;
  for (const cudnn::ConvUse& use : cudnn::conv_uses()) {
    if (use.calls == 0) continue;
    ++keys;
    calls += use.calls;
    if (use.fastest_ms < 0) {
      ++untimed_keys;
      continue;
    }
    conv_ms += static_cast<double>(use.calls) * use.fastest_ms;
  }
  const double bytes = optimizer_bytes(parameters, optimizer);
  const double peak = device_copy_peak(device);
  const double total_s = conv_ms / 1e3 + bytes / peak;
  char text[512];
  std::snprintf(text, sizeof text,
                ", \"speed_of_light\": {\"s\": %.6f, \"conv_s\": %.6f, \"conv_calls\": %lld, \"conv_keys\": %lld, "
                "\"untimed_keys\": %lld, \"complete\": %s, \"optimizer_bytes\": %.0f, \"copy_peak_gbs\": %.1f, "
                "\"median_over_it\": %.3f}",
                total_s, conv_ms / 1e3, static_cast<long long>(calls), static_cast<long long>(keys),
                static_cast<long long>(untimed_keys), untimed_keys == 0 ? "true" : "false", bytes, peak / 1e9,
                median_s / total_s);
  return text;
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

}  // namespace

int run(const Settings& settings) {
  using namespace kiln;
  init();
  manual_seed(0);

  const Device device = settings.cuda != 0 ? Device::cuda() : Device::cpu();
  KILN_CHECK(settings.graphs == 0 || settings.warmup >= 3, "--graphs 1 needs --warmup 3 or more (two eager steps ",
             "and the capture are not timed), got ", settings.warmup);
  cudnn::set_benchmark(device.is_cuda());
  set_allow_tf32_conv(settings.tf32 != 0);
  set_allow_tf32_matmul(settings.tf32 != 0);
  const std::shared_ptr<nn::Layer> model = make_model(settings);
  model->to(device);
  const MemoryFormat format =
      settings.channels_last != 0 ? MemoryFormat::ChannelsLast3d : MemoryFormat::Contiguous;
  model->to(format);
  const int64_t parameters = nn::parameter_count(*model);
  optim::Adam optimizer(model->parameters(), {.lr = 1e-3});

  const Tensor input =
      randn({settings.batch, 1, settings.side, settings.side, settings.side}).to(device).contiguous(format);
  const Tensor target = randint(0, settings.classes, {settings.batch}).to(device);

  const auto eager_step = [&](const Tensor& x, const Tensor& y) {
    Tensor loss;
    {
      const AutocastGuard autocast(DType::BFloat16, settings.bf16 != 0);
      loss = cross_entropy(model->forward(x), y);
    }
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
  };
  std::unique_ptr<train::GraphedStep> graphed;
  if (settings.graphs != 0) {
    optimizer.set_capturable(true);
    graphed = std::make_unique<train::GraphedStep>(
        device, [&](const data::Batch& b) { eager_step(b.at("image"), b.at("label")); },
        train::GraphedStepOptions{.warmup_steps = 2, .optimizer = &optimizer});
  }
  const auto train_step = [&](const Tensor& x, const Tensor& y) {
    if (!graphed) return eager_step(x, y);
    data::Batch batch;
    batch.tensors.emplace("image", x);
    batch.tensors.emplace("label", y);
    graphed->run(batch);
  };
  std::vector<double> seconds;
  std::string loader_json;
  if (settings.loader != 0) {
    // Batches from a loader through the prefetcher: an untimed epoch of warm-up batches,
    // then a timed one, synchronized only at its end so copies overlap steps as they
    // would in training; each step's time is the epoch's over its batches.
    const auto shapes = [&](int64_t batches, uint64_t seed) {
      return std::make_shared<data::SyntheticShapes>(
          data::SyntheticShapesOptions{.size = batches * settings.batch, .side = settings.side, .seed = seed});
    };
    const auto epoch_of = [&](const std::shared_ptr<data::SyntheticShapes>& dataset) {
      data::DataLoader loader(dataset, {.batch_size = settings.batch, .num_workers = 2, .pin_memory = device.is_cuda()});
      data::DevicePrefetcher prefetcher(loader, device);
      const auto start = std::chrono::steady_clock::now();
      for (data::Batch& batch : prefetcher.epoch(0))
        train_step(batch.at("image").contiguous(format), batch.at("label"));
      synchronize(device);
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return std::make_pair(elapsed, prefetcher.stats());
    };
    if (settings.warmup > 0) epoch_of(shapes(settings.warmup, 1));
    const auto [elapsed, stats] = epoch_of(shapes(settings.steps, 2));
    seconds.assign(static_cast<size_t>(settings.steps), elapsed / static_cast<double>(settings.steps));
    char text[256];
    std::snprintf(text, sizeof text,
                  ", \"loader\": {\"wait_s\": %.4f, \"load_s\": %.4f, \"collate_s\": %.4f, \"copy_s\": %.4f, "
                  "\"copy_wait_s\": %.5f}",
                  stats.wait_seconds, stats.load_seconds, stats.collate_seconds, stats.copy_seconds,
                  stats.copy_wait_seconds);
    loader_json = text;
  } else {
    for (int64_t step = 0; step < settings.warmup + settings.steps; ++step) {
      if (step == settings.warmup) reset_peak_memory_stats(device);
      const auto start = std::chrono::steady_clock::now();
      train_step(input, target);
      synchronize(device);
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (step >= settings.warmup) seconds.push_back(elapsed);
    }
  }

  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const std::string speed_of_light =
      settings.speed_of_light == 0
          ? ""
          : speed_of_light_json(device, [&] { eager_step(input, target); }, median, model->parameters(), optimizer);
  std::printf(
      "{\"framework\": \"kiln\", \"model\": \"%s\", \"memory_efficient\": %s, \"device\": \"%s\", \"tf32\": "
      "%s, \"batch\": %lld, \"side\": %lld, \"fuse_bn_relu\": %s, \"channels_last\": %s, \"parameters\": "
      "%lld, "
      "\"graphs\": %s, \"graph_replays\": %lld, \"bf16\": %s, \"cudnn\": \"%s\", \"step_s\": [",
      settings.model.c_str(), settings.memory_efficient != 0 ? "true" : "false", device.str().c_str(),
      settings.tf32 != 0 ? "true" : "false", static_cast<long long>(settings.batch),
      static_cast<long long>(settings.side), settings.fuse_bn_relu != 0 ? "true" : "false",
      settings.channels_last != 0 ? "true" : "false", static_cast<long long>(parameters),
      settings.graphs != 0 ? "true" : "false", static_cast<long long>(graphed ? graphed->replays() : 0),
      settings.bf16 != 0 ? "true" : "false", device.is_cuda() ? cuda_info().cudnn_version.c_str() : "");
  for (size_t i = 0; i < seconds.size(); ++i) std::printf("%s%.4f", i ? ", " : "", seconds[i]);
  const AllocatorStats cache = cpu_memory_stats();
  std::printf(
      "], \"median_s\": %.4f, \"samples_per_s\": %.3f, \"peak_rss_mb\": %.1f, "
      "\"cpu_cache_peak_allocated_mb\": %.1f, \"cpu_cache_peak_reserved_mb\": %.1f, \"step_peak_allocated_mb\": %.1f%s%s}\n",
      median, static_cast<double>(settings.batch) / median, peak_rss_mb(),
      static_cast<double>(cache.peak_allocated_bytes) / (1 << 20),
      static_cast<double>(cache.peak_reserved_bytes) / (1 << 20),
      static_cast<double>(memory_stats(device).peak_allocated_bytes) / (1 << 20), loader_json.c_str(),
      speed_of_light.c_str());
  return 0;
}

int main(int argc, char** argv) {
  const Settings settings = parse(argc, argv);
  try {
    return run(settings);
  } catch (const kiln::Error& error) {
    std::fprintf(stderr, "kiln_train_step: %s\n", error.what());
    return 1;
  }
}
