// Samplers: which dataset indices an epoch visits, in which order, as PyTorch's samplers
// do, but stateless: indices(epoch) is a function of the sampler's settings and the epoch
// alone (its random order comes from a generator seeded with (seed, epoch)), so a resumed
// run or another worker count sees the same order (Note [Per-sample randomness] in
// data/transforms.h). DistributedSampler gives each rank its share of the same order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The dataset indices of epoch `epoch`, in visiting order.
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
  // How many indices an epoch has.
  virtual int64_t size() const = 0;
};
using SamplerPtr = std::shared_ptr<const Sampler>;

// 0, 1, ..., n - 1.
class SequentialSampler final : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
};

// A permutation of 0 .. n - 1 each epoch, or with replacement `num_samples` uniform draws
// (num_samples 0: n).
class RandomSampler final : public Sampler {
 public:
  explicit RandomSampler(int64_t n, uint64_t seed = 0, bool replacement = false, int64_t num_samples = 0);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return num_samples_; }

 private:
  int64_t n_;
  uint64_t seed_;
  bool replacement_;
  int64_t num_samples_;
};

// `num_samples` indices drawn with probability proportional to `weights` (with
// replacement by default: the class-imbalance sampler, e.g. 1 / class frequency per
// sample), as torch.utils.data.WeightedRandomSampler.
class WeightedRandomSampler final : public Sampler {
 public:
  WeightedRandomSampler(std::vector<double> weights, int64_t num_samples, uint64_t seed = 0,
                        bool replacement = true);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return num_samples_; }

 private:
  std::vector<double> weights_;
  int64_t num_samples_;
  uint64_t seed_;
  bool replacement_;
};

// Rank `rank` of `num_replicas` takes every num_replicas-th index of the epoch's order
// (shuffled with (seed, epoch) when `shuffle`, so every rank agrees), starting at its
// rank; the order is first padded by repeating its start (or, with drop_last, cut) to a
// multiple of num_replicas, so every rank gets the same count (torch's DistributedSampler).
class DistributedSampler final : public Sampler {
 public:
  DistributedSampler(int64_t n, int64_t num_replicas, int64_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return per_rank_; }

 private:
  int64_t n_, num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t per_rank_;
};

// Batch samplers: the batches of an epoch, each a list of dataset indices (PyTorch's
// batch_sampler), for batches that cutting one order into equal pieces cannot make
// (grouping volumes of similar size, balanced classes per batch). Stateless as samplers.
class BatchSampler {
 public:
  virtual ~BatchSampler() = default;
  virtual std::vector<std::vector<int64_t>> batches(int64_t epoch) const = 0;
  // How many batches an epoch has.
  virtual int64_t size() const = 0;
};
using BatchSamplerPtr = std::shared_ptr<const BatchSampler>;

// A sampler's order cut into batches of `batch_size` (the last one shorter, or dropped
// with drop_last): torch.utils.data.BatchSampler, and what a DataLoader does when given a
// sampler and a batch size.
class SamplerBatches final : public BatchSampler {
 public:
  SamplerBatches(SamplerPtr sampler, int64_t batch_size, bool drop_last = false);
  std::vector<std::vector<int64_t>> batches(int64_t epoch) const override;
  int64_t size() const override;

 private:
  SamplerPtr sampler_;
  int64_t batch_size_;
  bool drop_last_;
};

}  // namespace kiln::data
