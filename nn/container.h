// Containers: Sequential (layers applied in order, named "0", "1", ... or by the user)
// and ModuleList (an indexable list of modules whose parameters the parent owns; the
// parent decides how to call them).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "nn/layer.h"

namespace kiln::nn {

class Sequential : public Layer {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Layer>> layers);

  // Appends a layer named by its position ("0", "1", ...), or by `name`.
  void push_back(std::shared_ptr<Layer> layer);
  void push_back(const std::string& name, std::shared_ptr<Layer> layer);
  // Each layer's output is the next one's input; an empty Sequential is the identity.
  Tensor forward(const Tensor& input) override;

  size_t size() const { return layers_.size(); }
  bool empty() const { return layers_.empty(); }
  const std::shared_ptr<Layer>& operator[](size_t index) const;
  std::vector<std::shared_ptr<Layer>>::const_iterator begin() const { return layers_.begin(); }
  std::vector<std::shared_ptr<Layer>>::const_iterator end() const { return layers_.end(); }
  std::string type_name() const override { return "Sequential"; }

 private:
  std::vector<std::shared_ptr<Layer>> layers_;
};

class ModuleList : public Module {
 public:
  ModuleList() = default;
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);

  // Appends a module named by its position ("0", "1", ...).
  void push_back(std::shared_ptr<Module> module);
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  const std::shared_ptr<Module>& operator[](size_t index) const;
  // The entry as a concrete type; an error if it is not one.
  template <typename M>
  std::shared_ptr<M> at(size_t index) const {
    std::shared_ptr<M> m = std::dynamic_pointer_cast<M>((*this)[index]);
    KILN_CHECK(m != nullptr, "ModuleList: entry ", index, " is a ", (*this)[index]->type_name(),
               ", not the type asked for");
    return m;
  }
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }
  std::string type_name() const override { return "ModuleList"; }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace kiln::nn
