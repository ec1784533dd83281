// train_cnn3d: a small 3D CNN learns to tell three shapes apart in noisy volumes, on the
// best device there is (the GPU when CUDA is available, else the CPU).
//
// What `make demo` runs. Written against the public API as a user would:
//   - data: 16^3 single-channel volumes, each holding one solid ball, cube or cross
//     ("jack": three orthogonal bars) of random size and position, plus Gaussian noise;
//     made on the host from Kiln's Philox generator, then moved to the device once;
//   - model: three conv3d -> batch norm -> ReLU blocks (no conv bias before batch norm:
//     the norm's shift makes it redundant), max pooling between them, global average
//     pooling and a linear classifier, built from nn::Sequential;
//   - training: mini-batches in a shuffled order, cross-entropy, backward, SGD with
//     momentum written out by hand (optimizers are the next layer up), the learning rate
//     annealed along a cosine to 0, gradients set to None after each step;
//   - validation: eval() (running batch-norm statistics) under NoGradGuard. The running
//     statistics average the last ~10 batches (momentum 0.1), so they describe the
//     weights of a few steps ago: while the weights still move fast, eval accuracy
//     trails the training accuracy and jumps around; the annealed learning rate lets
//     the weights settle so that the last epochs' statistics fit them;
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

#include "core/ops.h"
#include "kernels/init.h"
#include "nn/nn.h"

using namespace kiln;

namespace {

constexpr int64_t kSide = 16;  // volumes are kSide^3
constexpr int64_t kClasses = 3;
constexpr int64_t kTrainSize = 768;
constexpr int64_t kValSize = 192;
constexpr int64_t kBatch = 16;
constexpr int kEpochs = 8;
constexpr double kLearningRate = 0.01;  // at the first epoch, then cosine-annealed to 0
constexpr double kMomentum = 0.9;
constexpr double kNoise = 0.35;

struct Dataset {
  Tensor volumes;  // [N, 1, kSide, kSide, kSide] float32
  Tensor labels;   // [N] int64
};

// Whether voxel (z, y, x) is inside a shape of class `label` centred at c with size r.
bool inside(int64_t label, const double c[3], double r, int64_t z, int64_t y, int64_t x) {
  const double d[3] = {std::abs(z - c[0]), std::abs(y - c[1]), std::abs(x - c[2])};
  switch (label) {
    case 0: return d[0] * d[0] + d[1] * d[1] + d[2] * d[2] <= r * r;      // ball
    case 1: return d[0] <= 0.8 * r && d[1] <= 0.8 * r && d[2] <= 0.8 * r;  // cube
    default: {                                                          // jack
      const double arm = 1.2;
      const int thin = (d[0] <= arm) + (d[1] <= arm) + (d[2] <= arm);
      return thin >= 2 && d[0] <= r + 1 && d[1] <= r + 1 && d[2] <= r + 1;
    }
  }
}

Dataset make_shapes(int64_t count, uint64_t seed) {
  Generator gen(seed);
  const int64_t voxels = kSide * kSide * kSide;
  const std::vector<double> params = rand({count, 5}, {.dtype = DType::Float64}, &gen).to_vector<double>();
  const std::vector<float> noise = randn({count * voxels}, {}, &gen).to_vector<float>();
  std::vector<float> data(static_cast<size_t>(count * voxels));
  std::vector<int64_t> labels(static_cast<size_t>(count));
  for (int64_t n = 0; n < count; ++n) {
    const double* p = &params[static_cast<size_t>(n * 5)];
    const int64_t label = std::min<int64_t>(kClasses - 1, static_cast<int64_t>(p[0] * kClasses));
    const double r = 3.0 + 2.0 * p[1];
    const double c[3] = {5.5 + 5.0 * p[2], 5.5 + 5.0 * p[3], 5.5 + 5.0 * p[4]};
    labels[static_cast<size_t>(n)] = label;
    for (int64_t z = 0; z < kSide; ++z)
      for (int64_t y = 0; y < kSide; ++y)
        for (int64_t x = 0; x < kSide; ++x) {
          const int64_t i = n * voxels + (z * kSide + y) * kSide + x;
          const float signal = inside(label, c, r, z, y, x) ? 1.0f : 0.0f;
          data[static_cast<size_t>(i)] = signal + static_cast<float>(kNoise) * noise[static_cast<size_t>(i)];
        }
  }
  return {tensor(data, {count, 1, kSide, kSide, kSide}), tensor(labels)};
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

// SGD with momentum (PyTorch's form: v = mu v + g; p -= lr v), then gradients to None.
class MomentumSgd {
 public:
  explicit MomentumSgd(std::vector<Tensor> params) : params_(std::move(params)) {
    for (const Tensor& p : params_) velocity_.push_back(zeros_like(p));
  }
  void step(double lr) {
    NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor& p = params_[i];
      if (!p.grad().defined()) continue;
      velocity_[i].mul_(kMomentum).add_(p.grad());
      p.sub_(velocity_[i], lr);
      p.set_grad(Tensor());
    }
  }

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> velocity_;
};

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  return sum(eq(argmax(logits, 1), labels)).item<int64_t>();
}

double accuracy(nn::Sequential& model, const Dataset& data) {
  model.eval();
  NoGradGuard no_grad;
  int64_t correct = 0;
  const int64_t n = data.labels.size(0);
  for (int64_t start = 0; start < n; start += kBatch) {
    const int64_t len = std::min(kBatch, n - start);
    correct += count_correct(model.forward(narrow(data.volumes, 0, start, len)), narrow(data.labels, 0, start, len));
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
  MomentumSgd sgd(model->parameters());
  Generator shuffle_gen(11);

  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    model->train();
    const double lr = kLearningRate * 0.5 * (1.0 + std::cos(M_PI * (epoch - 1) / kEpochs));
    const Tensor order = randperm(kTrainSize, {.dtype = DType::Int64, .device = device}, &shuffle_gen);
    double loss_sum = 0.0;
    int64_t correct = 0;
    for (int64_t b = 0; b + kBatch <= kTrainSize; b += kBatch) {
      const Tensor idx = narrow(order, 0, b, kBatch);
      const Tensor x = index_select(train.volumes, 0, idx);
      const Tensor y = index_select(train.labels, 0, idx);
      const Tensor logits = model->forward(x);
      const Tensor loss = cross_entropy(logits, y);
      loss.backward();
      sgd.step(lr);
      loss_sum += loss.item<double>();
      correct += count_correct(logits.detach(), y);
    }
    const int64_t steps = kTrainSize / kBatch;
    const double val_acc = accuracy(*model, val);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("epoch %d  lr %.4f  loss %.4f  train acc %5.1f%%  val acc %5.1f%%  %.2f s (%.0f volumes/s)\n", epoch, lr,
                loss_sum / static_cast<double>(steps),
                100.0 * static_cast<double>(correct) / static_cast<double>(steps * kBatch), 100.0 * val_acc,
                seconds, static_cast<double>(kTrainSize + kValSize) / seconds);
  }

  // Weights round trip: save, load into a fresh model, same predictions.
  const std::string path = (std::filesystem::temp_directory_path() / "kiln_train_cnn3d.safetensors").string();
  nn::save_weights(*model, path);
  auto reloaded = make_model();
  reloaded->to(device);
  nn::load_weights(*reloaded, path);
  const double before = accuracy(*model, val);
  const double after = accuracy(*reloaded, val);
  std::printf("weights saved to %s and reloaded: val acc %.1f%% -> %.1f%%\n", path.c_str(), 100.0 * before,
              100.0 * after);
  std::filesystem::remove(path);
  return after == before ? 0 : 1;
}
