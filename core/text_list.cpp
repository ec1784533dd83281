// split_list, split_names and joined (core/text_list.h): one pass over the text.
#include "core/text_list.h"

#include <algorithm>

namespace kiln {

std::vector<std::string> split_list(std::string_view text, char separator) {
  std::vector<std::string> items;
  if (text.empty()) return items;
  for (size_t begin = 0;;) {
    const size_t end = text.find(separator, begin);
    items.emplace_back(text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
    if (end == std::string_view::npos) return items;
    begin = end + 1;
  }
}

std::vector<std::string> split_names(std::string_view text, char separator) {
  std::vector<std::string> names = split_list(text, separator);
  std::erase(names, std::string());
  return names;
}

std::string joined(const std::vector<std::string>& items, std::string_view separator) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += separator;
    text += items[i];
  }
  return text;
}

}  // namespace kiln
