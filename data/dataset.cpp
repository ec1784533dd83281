// Sample, Dataset's index check, Subset, ConcatDataset and random_split (data/dataset.h).
#include "data/dataset.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/ops/random.h"

namespace kiln::data {

const Tensor& tensor_named(const std::map<std::string, Tensor>& tensors, const std::string& name,
                           const char* what) {
  const auto it = tensors.find(name);
  if (it == tensors.end()) {
    std::string names;
    for (const auto& [key, tensor] : tensors) names += (names.empty() ? "" : ", ") + key;
    KILN_CHECK(false, what, " has no tensor '", name, "' (it has: ", names.empty() ? "none" : names, ")");
  }
  return it->second;
}

const Tensor& Sample::at(const std::string& name) const { return tensor_named(tensors, name, "sample"); }

void Dataset::check_index(int64_t index) const {
  KILN_CHECK(index >= 0 && index < size(), name(), ": index ", index, " is out of range for ", size(),
             " samples");
}

Subset::Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  KILN_CHECK(base_ != nullptr, "Subset: no dataset");
  for (int64_t i : indices_) {
    KILN_CHECK(i >= 0 && i < base_->size(), "Subset of ", base_->name(), ": index ", i,
               " is out of range for ", base_->size(), " samples");
  }
}

Sample Subset::get(int64_t index) const {
  check_index(index);
  return base_->get(indices_[static_cast<size_t>(index)]);
}

std::string Subset::name() const { return "Subset of " + base_->name(); }

ConcatDataset::ConcatDataset(std::vector<std::shared_ptr<const Dataset>> parts) : parts_(std::move(parts)) {
  int64_t total = 0;
  for (const auto& part : parts_) {
    KILN_CHECK(part != nullptr, "ConcatDataset: a part is null");
    total += part->size();
    ends_.push_back(total);
  }
}

Sample ConcatDataset::get(int64_t index) const {
  check_index(index);
  const size_t part =
      static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), index) - ends_.begin());
  return parts_[part]->get(index - (part == 0 ? 0 : ends_[part - 1]));
}

std::string ConcatDataset::name() const {
  std::string names;
  for (const auto& part : parts_) names += (names.empty() ? "" : " + ") + part->name();
  return "ConcatDataset(" + names + ")";
}

std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<const Dataset>& dataset,
                                                  const std::vector<int64_t>& lengths, Generator& generator) {
  KILN_CHECK(dataset != nullptr, "random_split: no dataset");
  int64_t total = 0;
  for (int64_t length : lengths) {
    KILN_CHECK(length >= 0, "random_split: lengths must be non-negative, got ", length);
    total += length;
  }
  KILN_CHECK(total == dataset->size(), "random_split: the lengths add up to ", total, " but ",
             dataset->name(), " has ", dataset->size(), " samples");
  const std::vector<int64_t> order =
      randperm(total, {.dtype = DType::Int64}, &generator).to_vector<int64_t>();
  std::vector<std::shared_ptr<Subset>> subsets;
  int64_t start = 0;
  for (int64_t length : lengths) {
    subsets.push_back(std::make_shared<Subset>(
        dataset, std::vector<int64_t>(order.begin() + start, order.begin() + start + length)));
    start += length;
  }
  return subsets;
}

std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<const Dataset>& dataset,
                                                  const std::vector<double>& fractions,
                                                  Generator& generator) {
  KILN_CHECK(dataset != nullptr, "random_split: no dataset");
  const double sum = std::accumulate(fractions.begin(), fractions.end(), 0.0);
  KILN_CHECK(std::abs(sum - 1.0) < 1e-9, "random_split: fractions must add up to 1, got ", sum);
  std::vector<int64_t> lengths;
  int64_t assigned = 0;
  for (double f : fractions) {
    KILN_CHECK(f >= 0 && f <= 1, "random_split: each fraction must be in [0, 1], got ", f);
    lengths.push_back(static_cast<int64_t>(std::floor(f * static_cast<double>(dataset->size()))));
    assigned += lengths.back();
  }
  for (size_t i = 0; assigned < dataset->size() && !lengths.empty();
       i = (i + 1) % lengths.size(), ++assigned) {
    ++lengths[i];
  }
  return random_split(dataset, lengths, generator);
}

}  // namespace kiln::data
