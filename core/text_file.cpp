// read_text_file (core/text_file.h): the path checked (core/regular_file.h) and its size
// bounded, then the stream's buffer copied whole.
#include "core/text_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/regular_file.h"

namespace kiln {

std::string read_text_file(const std::string& path, const std::string& what) {
  check_regular_file(path, what);
  std::error_code error;
  const auto bytes = std::filesystem::file_size(path, error);
  KILN_CHECK(!error && static_cast<long long>(bytes) <= kMaxTextFileBytes, what, " '", path, "': ",
             error ? "its size cannot be read" : "larger than a text file Kiln reads whole (1 GiB)");
  std::ifstream file(path, std::ios::binary);
  KILN_CHECK(file, what, " '", path, "': cannot be opened");
  std::ostringstream text;
  text << file.rdbuf();
  KILN_CHECK(!file.bad(), what, " '", path, "': read error");
  return text.str();
}

}  // namespace kiln
