// The samplers of data/sampler.h: each epoch's random order from a generator seeded by
// sample_generator(seed, epoch, -1) (data/transforms.h), drawn with core's randperm,
// randint and multinomial-by-inverse-CDF over uniform draws.
#include "data/sampler.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/ops.h"
#include "data/transforms.h"

namespace kiln::data {
namespace {

// The generator of an epoch's order (index -1: no sample's).
Generator epoch_generator(uint64_t seed, int64_t epoch) { return sample_generator(seed, epoch, -1); }

std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch) {
  Generator g = epoch_generator(seed, epoch);
  return randperm(n, {.dtype = DType::Int64}, &g).to_vector<int64_t>();
}

}  // namespace

SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  KILN_CHECK(n >= 0, "SequentialSampler: n must be >= 0, got ", n);
}

std::vector<int64_t> SequentialSampler::indices(int64_t) const {
  std::vector<int64_t> out(static_cast<size_t>(n_));
  std::iota(out.begin(), out.end(), 0);
  return out;
}

RandomSampler::RandomSampler(int64_t n, uint64_t seed, bool replacement, int64_t num_samples)
    : n_(n), seed_(seed), replacement_(replacement), num_samples_(num_samples == 0 ? n : num_samples) {
  KILN_CHECK(n >= 0 && num_samples >= 0, "RandomSampler: n and num_samples must be >= 0");
  KILN_CHECK(replacement || num_samples_ == n, "RandomSampler: num_samples (", num_samples_,
             ") other than the dataset's size (", n, ") needs replacement = true");
  KILN_CHECK(!replacement || n > 0 || num_samples_ == 0, "RandomSampler: cannot draw from an empty dataset");
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const {
  if (!replacement_) return permutation(n_, seed_, epoch);
  Generator g = epoch_generator(seed_, epoch);
  return randint(0, n_, {num_samples_}, {.dtype = DType::Int64}, &g).to_vector<int64_t>();
}

WeightedRandomSampler::WeightedRandomSampler(std::vector<double> weights, int64_t num_samples, uint64_t seed,
                                             bool replacement)
    : weights_(std::move(weights)), num_samples_(num_samples), seed_(seed), replacement_(replacement) {
  KILN_CHECK(num_samples_ >= 0, "WeightedRandomSampler: num_samples must be >= 0, got ", num_samples_);
  int64_t positive = 0;
  for (double w : weights_) {
    KILN_CHECK(w >= 0 && std::isfinite(w), "WeightedRandomSampler: weights must be finite and >= 0, got ", w);
    positive += w > 0;
  }
  KILN_CHECK(num_samples_ == 0 || positive > 0, "WeightedRandomSampler: every weight is 0");
  KILN_CHECK(replacement_ || num_samples_ <= positive, "WeightedRandomSampler: ", num_samples_,
             " samples without replacement from ", positive, " with non-zero weight");
}

std::vector<int64_t> WeightedRandomSampler::indices(int64_t epoch) const {
  Generator g = epoch_generator(seed_, epoch);
  std::vector<double> weights = weights_;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(num_samples_));
  const std::vector<double> draws = rand({num_samples_}, {.dtype = DType::Float64}, &g).to_vector<double>();
  std::vector<double> cumulative(weights.size());
  std::partial_sum(weights.begin(), weights.end(), cumulative.begin());
  for (double u : draws) {
    // the first index whose cumulative weight exceeds u * total (inverse CDF)
    const double target = u * cumulative.back();
    // (the first cumulative past the target has a positive weight; u * total rounding up to
    // total falls back to the last positive weight)
    int64_t index = std::upper_bound(cumulative.begin(), cumulative.end(), target) - cumulative.begin();
    if (index == static_cast<int64_t>(cumulative.size())) {
      do {
        --index;
      } while (weights[static_cast<size_t>(index)] == 0);
    }
    out.push_back(index);
    if (!replacement_) {  // remove it from the pool
      weights[static_cast<size_t>(index)] = 0;
      std::partial_sum(weights.begin(), weights.end(), cumulative.begin());
    }
  }
  return out;
}

DistributedSampler::DistributedSampler(int64_t n, int64_t num_replicas, int64_t rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : n_(n), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  KILN_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas must be >= 1, got ", num_replicas);
  KILN_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: rank ", rank, " is not in [0, ",
             num_replicas, ")");
  KILN_CHECK(n >= 0, "DistributedSampler: n must be >= 0, got ", n);
  per_rank_ = drop_last_ ? n_ / num_replicas_ : (n_ + num_replicas_ - 1) / num_replicas_;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order =
      shuffle_ ? permutation(n_, seed_, epoch) : SequentialSampler(n_).indices(epoch);
  const int64_t total = per_rank_ * num_replicas_;
  if (static_cast<int64_t>(order.size()) > total) {
    order.resize(static_cast<size_t>(total));
  } else {
    for (int64_t i = 0; static_cast<int64_t>(order.size()) < total; ++i)
      order.push_back(order[static_cast<size_t>(i % n_)]);
  }
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(order[static_cast<size_t>(i)]);
  return mine;
}

SamplerBatches::SamplerBatches(SamplerPtr sampler, int64_t batch_size, bool drop_last)
    : sampler_(std::move(sampler)), batch_size_(batch_size), drop_last_(drop_last) {
  KILN_CHECK(sampler_ != nullptr, "SamplerBatches: no sampler");
  KILN_CHECK(batch_size_ >= 1, "SamplerBatches: batch_size must be >= 1, got ", batch_size_);
}

std::vector<std::vector<int64_t>> SamplerBatches::batches(int64_t epoch) const {
  std::vector<std::vector<int64_t>> out;
  const std::vector<int64_t> order = sampler_->indices(epoch);
  const auto b = static_cast<size_t>(batch_size_);
  for (size_t start = 0; start < order.size(); start += b) {
    const size_t end = std::min(order.size(), start + b);
    if (drop_last_ && end - start < b) break;
    out.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start),
                     order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}

int64_t SamplerBatches::size() const {
  const int64_t n = sampler_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

}  // namespace kiln::data
