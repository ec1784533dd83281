// The options of an optimizer by name, written once per optimizer: a table of (name,
// member) pairs ties its options struct (SGDOptions, AdamOptions, ...) to the named
// values a parameter group holds, as PyTorch's param_group dicts (schedulers set "lr" or
// "momentum" by name; state dicts save them by name).
//
//   constexpr std::array kSgdFields = {number_option("lr", &SGDOptions::lr), ...,
//                                      flag_option("nesterov", &SGDOptions::nesterov)};
//   Options defaults = to_options(SGDOptions{.lr = 0.1}, kSgdFields);   // struct -> names
//   SGDOptions o = from_options<SGDOptions>("SGD", group.options, kSgdFields);  // and back
//
// An optimizer's update() reads its group through from_options, so a kernel's parameters
// come from typed fields (a misspelt option is a compile error, not a run-time lookup),
// and the names exist only in the table. Flags are stored as 0/1; from_options refuses
// any other value, naming the optimizer and the option.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "core/error.h"
#include "optim/optimizer.h"

namespace kiln::optim {

// One option of options struct O: a double member or a bool member (a flag).
template <typename O>
struct OptionField {
  const char* name;
  double O::*number = nullptr;
  bool O::*flag = nullptr;
};

template <typename O>
constexpr OptionField<O> number_option(const char* name, double O::*member) {
  return {.name = name, .number = member};
}

template <typename O>
constexpr OptionField<O> flag_option(const char* name, bool O::*member) {
  return {.name = name, .flag = member};
}

// o's fields by name (flags as 0 or 1).
template <typename O>
Options to_options(const O& o, std::span<const OptionField<O>> fields) {
  Options options;
  for (const OptionField<O>& f : fields) options[f.name] = f.number ? o.*f.number : (o.*f.flag ? 1.0 : 0.0);
  return options;
}

// The fields of O read from `options`, which must hold every one of them; a flag must be
// 0 or 1 ("SGD: option nesterov is a flag, 0 or 1, got 2").
template <typename O>
O from_options(const std::string& who, const Options& options, std::span<const OptionField<O>> fields) {
  O o{};
  for (const OptionField<O>& f : fields) {
    const auto it = options.find(f.name);
    KILN_CHECK(it != options.end(), who, ": parameter group has no option \"", f.name, "\"");
    if (f.number) {
      o.*f.number = it->second;
    } else {
      KILN_CHECK(it->second == 0 || it->second == 1, who, ": option ", f.name, " is a flag, 0 or 1, got ",
                 it->second);
      o.*f.flag = it->second != 0;
    }
  }
  return o;
}

}  // namespace kiln::optim
