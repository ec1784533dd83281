// A list written as text, the way flags and messages carry one: "t1,t2,label" split at its
// commas, and names joined for a message ("sgd, adam, adamw"). Splitting keeps empty items
// ("1,,2" is three items, the middle one empty), so a caller decides whether an empty item
// is an error (a number) or nothing (a trailing comma in a list of names).
//
//   split_list("t1,t2")      // {"t1", "t2"}
//   joined({"sgd", "adam"})  // "sgd, adam"
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// The items between `separator`s; an empty text is an empty list.
std::vector<std::string> split_list(std::string_view text, char separator = ',');

// The same list without its empty items ("a,,b," is {"a", "b"}).
std::vector<std::string> split_names(std::string_view text, char separator = ',');

// The items with `separator` between them.
std::string joined(const std::vector<std::string>& items, std::string_view separator = ", ");

}  // namespace kiln
