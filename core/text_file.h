// A whole file read as text, for the small files a program reads at once: configurations,
// tables, summaries (large binary files go through core/byte_source.h). A file that cannot
// be opened or read is a kiln::Error naming `what` and the path; so is one that is no
// regular file (a pipe would block the read, /dev/zero would fill memory) or larger than
// kMaxTextFileBytes.
//
//   const std::string text = read_text_file("runs/x/config.json", "--config");
#pragma once

#include <string>

namespace kiln {

inline constexpr long long kMaxTextFileBytes = 1LL << 30;  // 1 GiB: no configuration or table is larger

std::string read_text_file(const std::string& path, const std::string& what = "file");

}  // namespace kiln
