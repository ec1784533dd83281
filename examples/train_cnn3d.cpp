// train_cnn3d: a small 3D CNN learns to tell three shapes apart in noisy volumes, on the
// best device there is (the GPU when CUDA is available, else the CPU).
//
// What `make demo` runs. Written against the public API as a user would:
//   - data: 16^3 single-channel volumes of data::SyntheticShapes, each holding one solid
//     ball, cube or cross ("jack": three orthogonal bars) of random size and position,
//     plus Gaussian noise; made on the host, then moved to the device once;
//   - model: three conv3d -> batch norm -> ReLU blocks (no conv bias before batch norm:
//     the norm's shift makes it redundant), max pooling between them, global average
//     pooling and a linear classifier, built from nn::Sequential;
//   - training, the recipe of the "faster PyTorch training" guides, each piece one line:
//     AdamW (fused multi-tensor update), a cyclic learning rate stepped every batch
//     (triangular2: up for an epoch, down for the next, the amplitude halving each
//     cycle so that the last epochs settle; the cycle also drives Adam's beta1 the
//     other way), mixed precision under autocast
//     (bfloat16 on the CPU; float16 with a GradScaler on the GPU, whose dynamic loss
//     scale keeps small float16 gradients from underflowing), gradients unscaled then
//     clipped to norm 1, and set to None after each step;
//   - validation: eval() (running batch-norm statistics) under NoGradGuard and autocast.
//     The running statistics average the last ~10 batches (momentum 0.1), so they
//     describe the weights of a few steps ago: while the weights still move fast, eval
//     accuracy trails the training accuracy; the shrinking cycles let them settle;
//   - weights: saved as safetensors (atomically), loaded into a fresh model, which must
//     score exactly the same.
// Chance is 33%; the validation accuracy should pass 90% within the few epochs.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kiln/kiln.h"  // everything a user needs: <kiln/kiln.h> once installed

using namespace kiln;

namespace {

constexpr int64_t kSide = 16;  // volumes are kSide^3
constexpr int64_t kClasses = data::SyntheticShapes::kClasses;
constexpr int64_t kTrainSize = 768;
constexpr int64_t kValSize = 192;
constexpr int64_t kBatch = 16;
constexpr int kEpochs = 8;
constexpr double kBaseLr = 1e-4;   // CyclicLR: the low end of every cycle
constexpr double kMaxLr = 4e-3;    // the top of the first cycle (halved each cycle after)
constexpr double kMaxGradNorm = 1.0;
constexpr double kNoise = 0.35;

struct Dataset {
  Tensor volumes;  // [N, 1, kSide, kSide, kSide] float32
  Tensor labels;   // [N] int64
};

// The volumes of data::SyntheticShapes (samples 0 .. count-1 of a seed), stacked on the host.
Dataset make_shapes(int64_t count, uint64_t seed) {
  const data::SyntheticShapes shapes({.size = count, .side = kSide, .noise = kNoise, .seed = seed});
  std::vector<Tensor> volumes, labels;
  for (int64_t i = 0; i < count; ++i) {
    const data::Sample sample = shapes.get(i);
    volumes.push_back(sample.at("image"));
    labels.push_back(sample.at("label"));
  }
  return {stack(volumes), stack(labels)};
}

std::shared_ptr<nn::Sequential> conv_block(int64_t in, int64_t out) {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Conv3d>(nn::Conv3dOptions{
          .in_channels = in, .out_channels = out, .kernel_size = {3}, .padding = {1}, .bias = false}),
      std::make_shared<nn::BatchNorm3d>(nn::BatchNorm3dOptions{.num_features = out}),
      std::make_shared<nn::ReLU>()});
}

std::shared_ptr<nn::Sequential> make_model() {
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(conv_block(1, 8));
  model->push_back(std::make_shared<nn::MaxPool3d>(nn::MaxPool3dOptions{.kernel_size = {2}}));
  model->push_back(conv_block(8, 16));
  model->push_back(std::make_shared<nn::MaxPool3d>(nn::MaxPool3dOptions{.kernel_size = {2}}));
  model->push_back(conv_block(16, 32));
  model->push_back(std::make_shared<nn::AdaptiveAvgPool3d>(nn::AdaptiveAvgPool3dOptions{.output_size = {1}}));
  model->push_back(std::make_shared<nn::Flatten>());
  model->push_back(std::make_shared<nn::Linear>(nn::LinearOptions{.in_features = 32, .out_features = kClasses}));
  return model;
}

double accuracy(nn::Sequential& model, const Dataset& data, DType autocast_dtype) {
  model.eval();
  NoGradGuard no_grad;
  AutocastGuard autocast(autocast_dtype);
  int64_t correct = 0;
  const int64_t n = data.labels.size(0);
  for (int64_t start = 0; start < n; start += kBatch) {
    const int64_t len = std::min(kBatch, n - start);
    const Tensor logits = model.forward(narrow(data.volumes, 0, start, len));
    correct += sum(eq(argmax(logits, 1), narrow(data.labels, 0, start, len))).item<int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

}  // namespace

int main() {
  init();
  const Device device = cuda_is_available() ? Device::cuda() : Device::cpu();
  std::printf("train_cnn3d on %s%s\n", device.str().c_str(),
              cuda_is_available() ? "" : (" (" + cuda_unavailable_reason() + ")").c_str());

  manual_seed(7);
  const Dataset train_cpu = make_shapes(kTrainSize, 1);
  const Dataset val_cpu = make_shapes(kValSize, 2);
  const Dataset train{train_cpu.volumes.to(device), train_cpu.labels.to(device)};
  const Dataset val{val_cpu.volumes.to(device), val_cpu.labels.to(device)};

  auto model = make_model();
  model->to(device);
  std::printf("%s\n%lld parameters\n", model->to_string().c_str(),
              static_cast<long long>(nn::parameter_count(*model)));
  // Mixed precision: float16 + loss scaling on the GPU, bfloat16 (float32's exponent
  // range, no scaler needed) on the CPU. The scaler is off on the CPU, and then every
  // call on it is a pass-through, so the loop below is the same for both.
  const bool on_gpu = device.is_cuda();
  const DType low_precision = on_gpu ? DType::Float16 : DType::BFloat16;
  optim::AdamW optimizer(model->parameters(), {.lr = kMaxLr, .weight_decay = 1e-4});
  const int64_t steps_per_epoch = kTrainSize / kBatch;
  optim::CyclicLR schedule(optimizer, {.base_lr = kBaseLr,
                                       .max_lr = kMaxLr,
                                       .step_size_up = steps_per_epoch,  // one epoch up, one down
                                       .mode = optim::CyclicMode::Triangular2});
  optim::GradScaler scaler({.enabled = on_gpu});
  std::printf("AdamW + CyclicLR (triangular2, %g..%g) + autocast(%s)%s + clip_grad_norm_(%g)\n", kBaseLr, kMaxLr,
              std::string(dtype_name(low_precision)).c_str(), on_gpu ? " + GradScaler" : "", kMaxGradNorm);
  Generator shuffle_gen(11);

  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    model->train();
    const Tensor order = randperm(kTrainSize, {.dtype = DType::Int64, .device = device}, &shuffle_gen);
    const double first_lr = schedule.get_last_lr()[0];
    Tensor loss_sum = zeros({}, {.dtype = DType::Float32, .device = device});
    Tensor correct = zeros({}, {.dtype = DType::Int64, .device = device});
    for (int64_t b = 0; b + kBatch <= kTrainSize; b += kBatch) {
      const Tensor idx = narrow(order, 0, b, kBatch);
      const Tensor x = index_select(train.volumes, 0, idx);
      const Tensor y = index_select(train.labels, 0, idx);
      Tensor logits, loss;
      {
        AutocastGuard autocast(low_precision);
        logits = model->forward(x);     // convs and the linear layer in low precision
        loss = cross_entropy(logits, y);  // float32 (autocast's float32 list)
      }
      scaler.scale(loss).backward();
      scaler.unscale_(optimizer);  // clip the true gradients, not the scaled ones
      optim::clip_grad_norm_(model->parameters(), kMaxGradNorm);
      scaler.step(optimizer);      // skipped (on the device) if a gradient overflowed
      scaler.update();
      optimizer.zero_grad();       // gradients to None
      schedule.step();
      // Running totals stay on the device: no host sync inside the loop.
      NoGradGuard no_grad;
      loss_sum.add_(loss.detach());
      correct.add_(sum(eq(argmax(logits.detach(), 1), y)));
    }
    const double val_acc = accuracy(*model, val, low_precision);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("epoch %d  lr %.5f->%.5f  loss %.4f  train acc %5.1f%%  val acc %5.1f%%  %.2f s (%.0f volumes/s)\n",
                epoch, first_lr, schedule.get_last_lr()[0], loss_sum.item<double>() / static_cast<double>(steps_per_epoch),
                100.0 * static_cast<double>(correct.item<int64_t>()) / static_cast<double>(steps_per_epoch * kBatch),
                100.0 * val_acc, seconds, static_cast<double>(kTrainSize + kValSize) / seconds);
  }
  if (on_gpu) std::printf("final loss scale %g\n", scaler.get_scale());

  // Weights round trip: save, load into a fresh model, same predictions.
  const std::string path = (std::filesystem::temp_directory_path() / "kiln_train_cnn3d.safetensors").string();
  // The file is in place either way; a save that may not survive a crash says why.
  if (const SaveStatus saved = nn::save_weights(*model, path); !saved.durable) {
    std::fprintf(stderr, "warning: %s\n", saved.warning.c_str());
  }
  auto reloaded = make_model();
  reloaded->to(device);
  nn::load_weights(*reloaded, path);
  const double before = accuracy(*model, val, low_precision);
  const double after = accuracy(*reloaded, val, low_precision);
  std::printf("weights saved to %s and reloaded: val acc %.1f%% -> %.1f%%\n", path.c_str(), 100.0 * before,
              100.0 * after);
  std::filesystem::remove(path);
  return after == before ? 0 : 1;
}
