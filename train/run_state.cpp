// Trainer::State (train/run_state.h): the rooms' set-up.
#include "train/run_state.h"

#include <filesystem>
#include <iostream>

#include "core/cudnn.h"
#include "core/error.h"
#include "core/autograd/grad_mode.h"
#include "core/generator.h"
#include "core/ops.h"
#include "dist/sync_batch_norm.h"

namespace kiln::train {
namespace {

// The cuDNN settings of the run, and its algorithm cache loaded.
void configure_cudnn(const RunContext& run) {
  cudnn::set_benchmark(run.config.cudnn_benchmark);
  cudnn::set_deterministic(run.config.deterministic);
  if (!run.config.algo_cache.empty() && std::filesystem::exists(run.config.algo_cache) && run.device.is_cuda())
    cudnn::load_algorithm_cache(run.config.algo_cache);
}

// Note [A model that cannot take the input]: one sample's shape through the model, in eval
// mode and without gradients (nothing it keeps changes, no random number is drawn), before
// anything of the run is written: a model whose downsampling runs out of voxels (DenseNet's
// standard stem on 28^3 volumes) fails here, with the fix named, not in its first step
// after the run folder was started. cuDNN's heuristics choose the probe's algorithms even
// under --cudnn-benchmark: a batch of one is no shape the run trains on, so timing every
// algorithm for it would be set-up time spent on nothing.
void check_model_takes(nn::Layer& model, const TrainData& data, const TrainConfig& config, Device device) {
  data::Sample sample = data.val->get(0);
  if (data.eval_transform) {
    Generator unused(0);
    data.eval_transform->apply(sample, unused);
  }
  const Tensor& image = sample.at(data::kImage);
  const bool training = model.is_training();
  model.eval();
  try {
    const NoGradGuard no_grad;
    const cudnn::ScopedMode heuristics(/*benchmark=*/false, cudnn::deterministic());
    (void)model.forward(zeros(std::vector<int64_t>{1, image.size(0), image.size(1), image.size(2), image.size(3)},
                              {.dtype = DType::Float32, .device = device}));
  } catch (const Error& e) {
    model.train(training);
    throw Error("model " + config.model + " cannot take inputs of " + std::to_string(image.size(1)) + "x" +
                std::to_string(image.size(2)) + "x" + std::to_string(image.size(3)) + " voxels (" + e.what() +
                "); for small volumes use --stem small (DenseNet) or --stem medmnist (ResNet), or larger ones "
                "(--size 64, --resize)");
  }
  model.train(training);
}

std::ostream& output_stream(const RunContext& run, const TrainerOutput& output) {
  if (!run.distributed.writes()) return null_stream();  // rank 0 speaks for all
  return output.out != nullptr ? *output.out : std::cout;
}

}  // namespace

Trainer::State::State(RunContext run_in, TrainData data_in, std::shared_ptr<nn::Layer> model_in, TrainerOutput output)
    : run(std::move(run_in)),
      data(std::move(data_in)),
      model(std::move(model_in)),
      monitor(resolved_monitor(run.choices.monitor, data.task)),
      logs(output_stream(run, output), output.terminal, run.config.epochs,
           {.running = choice_name(running_metric(data.task)), .metrics = metric_names(validation_metrics(data.task))}),
      sums(run.device, running_metric_dtype(data.task)),
      checkpoints(run, choice_name(monitor),
                  {.task = data.task, .classes = data.classes, .channels = data.channels, .class_names = data.class_names},
                  logs.out()) {
  KILN_CHECK(model != nullptr, "Trainer: the model is null");
  KILN_CHECK(data.train && data.val && data.test, "Trainer: the data needs train, val and test datasets");
  configure_cudnn(run);
  const std::vector<int64_t> counts =
      run.config.pos_weight == "auto" ? class_counts(*data.train, data.classes) : std::vector<int64_t>{};
  objective = std::make_unique<Objective>(LossSettings::of(run.config, run.choices.loss), data.task, data.classes,
                                          counts, run.device);
  batches = make_batches(run, data);
  if (run.config.sync_bn) dist::convert_sync_batchnorm(*model, run.distributed.group);
  model->to(run.device);
  // Note [Channels-last training]: --channels-last lays the 5-d weights out NDHWC
  // (Module::to(MemoryFormat)). A convolution with a channels-last weight computes in
  // channels-last (Note [Convolution memory format]), so the stem converts the row-major
  // batch once (a one-channel scan's two layouts are the same bytes: not even that) and
  // every later op keeps the layout: batch norm, pooling, the residual adds, the
  // gradients and the optimizer's update (Note [Optimizer layouts]).
  if (run.config.channels_last) model->to(MemoryFormat::ChannelsLast3d);
  check_model_takes(*model, data, run.config, run.device);
  const int64_t steps_per_epoch = (batches.train->size() + run.config.accumulate - 1) / run.config.accumulate;
  optimization = std::make_unique<Optimization>(run, *model, steps_per_epoch, higher_is_better(monitor));
  if (run.distributed.enabled) {  // after amp: DDP hooks the parameters the optimizer holds
    ddp = std::make_shared<dist::DistributedDataParallel>(model, dist::DDPOptions{.group = run.distributed.group});
  }
  manual_seed(static_cast<uint64_t>(run.config.seed) + 1);  // dropout's stream, apart from the initialisation's
  sums.reset(progress);
  progress.world_size = run.distributed.world_size;
}

BottleneckReport Trainer::State::report(const std::vector<TimeRangeRecord>& records, double wall, int64_t steps,
                                      const HostSyncs& syncs) const {
  return bottleneck_report(records, wall, steps, syncs,
                           {.on_gpu = run.device.is_cuda(),
                            .workers = run.config.workers,
                            .pin_memory = run.config.pin_memory && run.device.is_cuda(),
                            .bfloat16 = run.amp.level != OptLevel::O0 && run.amp.low_dtype == DType::BFloat16,
                            .cuda_graphs = graphed != nullptr});
}

}  // namespace kiln::train
