// Datasets: what a DataLoader draws samples from. A Sample is a set of named tensors
// ("image", "label", ...) and optional text metadata (such as the file a sample came
// from); a Dataset has a size and returns sample `index`, and must be safe to call from
// several threads at once (loader workers are threads). Subset, ConcatDataset and
// random_split compose datasets as PyTorch's torch.utils.data does.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace kiln::data {

// The tensors every dataset of Kiln's names so: the input volume and its target (a class, a
// set of labels, a value or a label map). Transforms act on kImage by default, and the
// trainer takes these two from each batch.
inline constexpr const char* kImage = "image";
inline constexpr const char* kLabel = "label";

// tensors[name], or an error "<what> has no tensor '<name>' (it has: ...)".
const Tensor& tensor_named(const std::map<std::string, Tensor>& tensors, const std::string& name,
                           const char* what);

struct Sample {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
  // The tensor called `name`; an error naming the ones there are when it is missing.
  const Tensor& at(const std::string& name) const;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Sample `index`, 0 <= index < size() (else a kiln::Error naming the dataset); called
  // concurrently from loader threads.
  virtual Sample get(int64_t index) const = 0;
  // What messages call the dataset ("MedMNIST adrenalmnist3d train").
  virtual std::string name() const = 0;

 protected:
  // Throws the out-of-range error every get() gives.
  void check_index(int64_t index) const;
};

// The samples indices[0], indices[1], ... of `base`, in that order (torch.utils.data.Subset).
class Subset final : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Sample get(int64_t index) const override;
  std::string name() const override;
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

// The datasets one after the other (torch.utils.data.ConcatDataset).
class ConcatDataset final : public Dataset {
 public:
  explicit ConcatDataset(std::vector<std::shared_ptr<const Dataset>> parts);
  int64_t size() const override { return ends_.empty() ? 0 : ends_.back(); }
  Sample get(int64_t index) const override;
  std::string name() const override;

 private:
  std::vector<std::shared_ptr<const Dataset>> parts_;
  std::vector<int64_t> ends_;  // cumulative sizes
};

// Splits `dataset` into random, non-overlapping subsets of the given lengths, which must
// add up to its size (torch.utils.data.random_split, drawing one permutation from
// `generator`).
std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<const Dataset>& dataset,
                                                  const std::vector<int64_t>& lengths, Generator& generator);
// The same with fractions that add up to 1: floor(fraction * size) each, and the
// remainder handed out one by one from the first subset on (PyTorch's rule).
std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<const Dataset>& dataset,
                                                  const std::vector<double>& fractions, Generator& generator);

}  // namespace kiln::data
