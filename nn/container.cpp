// Sequential and ModuleList: registration under positional names and forward chaining.
#include "nn/container.h"

namespace kiln::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Layer>> layers) {
  for (const auto& layer : layers) push_back(layer);
}

void Sequential::push_back(std::shared_ptr<Layer> layer) { push_back(std::to_string(layers_.size()), std::move(layer)); }

void Sequential::push_back(const std::string& name, std::shared_ptr<Layer> layer) {
  add_child(name, layer);
  layers_.push_back(std::move(layer));
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& layer : layers_) x = layer->forward(x);
  return x;
}

const std::shared_ptr<Layer>& Sequential::operator[](size_t index) const {
  KILN_CHECK(index < layers_.size(), "Sequential: index ", index, " out of range for ", layers_.size(), " layers");
  return layers_[index];
}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& module : modules) push_back(module);
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  add_child(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t index) const {
  KILN_CHECK(index < modules_.size(), "ModuleList: index ", index, " out of range for ", modules_.size(), " modules");
  return modules_[index];
}

}  // namespace kiln::nn
