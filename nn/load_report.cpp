// Key mapping and the load report (load_report.h).
#include "nn/load_report.h"

#include <map>
#include <sstream>

#include "core/error.h"

namespace kiln::nn {
namespace {

bool matches(const std::string& key, const std::string& pattern) {
  if (!pattern.empty() && pattern.back() == '*')
    return key.starts_with(pattern.substr(0, pattern.size() - 1));
  return key == pattern;
}

void list(std::ostringstream& os, const char* title, const std::vector<std::string>& names) {
  if (names.empty()) return;
  os << "  " << title << " (" << names.size() << "):";
  for (size_t i = 0; i < names.size() && i < 20; ++i) os << (i ? ", " : " ") << names[i];
  if (names.size() > 20) os << ", ... (" << names.size() - 20 << " more)";
  os << "\n";
}

}  // namespace

StateDict map_keys(const StateDict& state, const KeyMapping& mapping, std::vector<std::string>* dropped,
                   size_t* stripped) {
  StateDict out;
  std::map<std::string, std::string> origin;  // mapped name -> original
  for (const auto& [original, tensor] : state) {
    std::string key = original;
    for (const std::string& prefix : mapping.strip_prefixes) {
      if (!prefix.empty() && key.starts_with(prefix)) {
        key.erase(0, prefix.size());
        if (stripped) ++*stripped;
        break;
      }
    }
    bool drop = false;
    for (const std::string& pattern : mapping.drop) drop = drop || matches(key, pattern);
    if (drop) {
      if (dropped) dropped->push_back(original);
      continue;
    }
    for (const auto& [from, to] : mapping.rename) {
      if (key.starts_with(from)) {
        key = to + key.substr(from.size());
        break;
      }
    }
    const auto [it, inserted] = origin.emplace(key, original);
    KILN_CHECK(inserted, "load_state_dict_mapped: '", it->second, "' and '", original, "' both map to '", key,
               "'");
    out.emplace_back(key, tensor);
  }
  return out;
}

LoadReport load_state_dict_mapped(Module& module, const StateDict& state, const KeyMapping& mapping) {
  LoadReport report;
  report.module_type = module.type_name();
  report.given = state.size();
  const StateDict mapped = map_keys(state, mapping, &report.dropped, &report.stripped);
  report.result = module.load_state_dict(mapped, /*strict=*/false);
  report.loaded = mapped.size() - report.result.unexpected_keys.size() - report.result.mismatched_keys.size();
  return report;
}

std::string LoadReport::to_string() const {
  std::ostringstream os;
  os << "loaded " << loaded << " of " << given << " tensors into " << module_type;
  if (stripped > 0) os << " (" << stripped << " keys had a prefix stripped)";
  os << (result.ok() && dropped.empty() ? ": everything matched\n" : "\n");
  list(os, "dropped by the mapping", dropped);
  list(os, "missing from the file (left as they were)", result.missing_keys);
  list(os, "unexpected (in the file, not in the model)", result.unexpected_keys);
  std::vector<std::string> mismatched;
  for (const MismatchedKey& m : result.mismatched_keys) {
    std::ostringstream line;
    line << m.name << " " << shape_str(m.got_shape) << " (model " << shape_str(m.expected_shape) << ")";
    mismatched.push_back(line.str());
  }
  list(os, "shape mismatch (not loaded)", mismatched);
  return os.str();
}

}  // namespace kiln::nn
