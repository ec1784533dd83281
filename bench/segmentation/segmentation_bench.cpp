// kiln_segmentation_bench: times the two costs of 3-D segmentation, a training step of a
// U-Net on patches and sliding-window inference over a whole volume, on the CPU or a GPU;
// segmentation_bench_monai.py does the same with MONAI and PyTorch (README.md).
//
//   --what step: --steps timed steps (after --warmup) of forward, DiceCE loss (softmax,
//     one-hot labels: MONAI's DiceCELoss(to_onehot_y=True, softmax=True)), backward, Adam,
//     gradients to None, on a fixed random batch of --batch patches of --patch^3 voxels.
//   --what sliding-window: the U-Net (eval, no autograd) over one --volume^3 volume in
//     --roi^3 windows, --overlap, --sw-batch windows per call, Gaussian blending; --steps
//     timed passes.
//   --model unet (MONAI's BasicUNet, its default features) or resunet (nnU-Net's ResEnc
//     with 5 stages of 32..320 features, deep supervision off for the timing);
//   --classes (3), --cuda 0|1, --channels-last 0|1 (the model and the input in NDHWC).
// One JSON line: each timed pass's seconds, the median, and the peak resident memory.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "nn/models/basic_unet.h"
#include "nn/models/res_unet.h"
#include "train/sliding_window.h"

namespace {

using namespace kiln;

struct Settings {
  std::string what = "step", model = "unet";
  std::map<std::string, int64_t> ints = {
      {"batch", 2}, {"patch", 64}, {"volume", 192}, {"roi", 96}, {"sw-batch", 4},
      {"steps", 3}, {"warmup", 1}, {"classes", 3},  {"cuda", 0}, {"channels-last", 0}};
  double overlap = 0.5;
  int64_t get(const std::string& name) const { return ints.at(name); }
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "kiln_segmentation_bench: %s\n", why.c_str());
  std::exit(2);
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag.rfind("--", 0) != 0 || i + 1 == argc) usage("expected --flag value, got " + flag);
    const std::string name = flag.substr(2), value = argv[++i];
    if (name == "what") {
      s.what = value;
    } else if (name == "model") {
      s.model = value;
    } else if (name == "overlap") {
      s.overlap = std::atof(value.c_str());
    } else if (s.ints.count(name)) {
      char* end = nullptr;
      s.ints[name] = std::strtoll(value.c_str(), &end, 10);
      if (*end != '\0' || s.ints[name] < 0)
        usage("--" + name + " takes a non-negative integer, got " + value);
    } else {
      usage("unknown flag " + flag);
    }
  }
  if (s.what != "step" && s.what != "sliding-window") usage("--what is step or sliding-window");
  if (s.model != "unet" && s.model != "resunet") usage("--model is unet or resunet");
  return s;
}

std::shared_ptr<nn::Layer> make_model(const Settings& s) {
  if (s.model == "unet")
    return std::make_shared<nn::models::BasicUNet>(
        nn::models::BasicUNetOptions{.out_channels = s.get("classes")});
  return std::make_shared<nn::models::ResUNet>(nn::models::ResUNetOptions{.features = {32, 64, 128, 256, 320},
                                                                          .blocks = {1, 3, 4, 6, 6},
                                                                          .num_classes = s.get("classes"),
                                                                          .deep_supervision = false});
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

}  // namespace

namespace {
int run(const Settings& s) {
  init();
  const Device device = s.get("cuda") ? Device::cuda(0) : Device::cpu();
  auto model = make_model(s);
  model->to(device);
  const MemoryFormat format =
      s.get("channels-last") ? MemoryFormat::ChannelsLast3d : MemoryFormat::Contiguous;
  model->to(format);
  Generator generator(7);
  std::function<void()> pass;
  std::unique_ptr<optim::Adam> adam;
  Tensor x, labels;
  if (s.what == "step") {
    const int64_t p = s.get("patch");
    x = randn({s.get("batch"), 1, p, p, p}, {}, &generator).to(device).contiguous(format);
    labels = randint(0, s.get("classes"), {s.get("batch"), 1, p, p, p}, {}, &generator).to(device);
    adam = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = 1e-3});
    model->train();
    pass = [&] {
      const Tensor loss =
          dice_ce_loss(model->forward(x), labels, {.dice = {.to_onehot_y = true, .softmax = true}});
      loss.backward();
      adam->step();
      adam->zero_grad();
      (void)loss.item<float>();
    };
  } else {
    const int64_t v = s.get("volume");
    x = randn({1, 1, v, v, v}, {}, &generator).to(device).contiguous(format);
    model->eval();
    pass = [&, o = train::SlidingWindowOptions{.roi_size = {s.get("roi")},
                                               .sw_batch_size = s.get("sw-batch"),
                                               .overlap = s.overlap,
                                               .mode = train::BlendMode::Gaussian}] {
      const Tensor out = train::sliding_window_inference(
          x, [&](const Tensor& w) { return model->forward(w); }, o);
      (void)out.sum().item<float>();
    };
  }
  for (int64_t i = 0; i < s.get("warmup"); ++i) pass();
  std::vector<double> seconds;
  for (int64_t i = 0; i < s.get("steps"); ++i) {
    const double start = now();
    pass();
    seconds.push_back(now() - start);
  }
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  std::string list;
  for (double t : seconds) list += (list.empty() ? "" : ", ") + std::to_string(t);
  int64_t parameters = 0;
  for (const Tensor& t : model->parameters()) parameters += t.numel();
  std::printf(
      "{\"framework\": \"kiln\", \"what\": \"%s\", \"model\": \"%s\", \"parameters\": %lld, "
      "\"seconds\": [%s], \"median_s\": %.4f, \"peak_rss_mb\": %.1f, \"channels_last\": %s}\n",
      s.what.c_str(), s.model.c_str(), static_cast<long long>(parameters), list.c_str(), median,
      peak_rss_mb(), s.get("channels-last") != 0 ? "true" : "false");
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const kiln::Error& error) {
    std::fprintf(stderr, "kiln_segmentation_bench: %s\n", error.what());
    return 1;
  }
}
