// read_text_file (core/text_file.h): the stream's buffer copied whole.
#include "core/text_file.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace kiln {

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream file(path, std::ios::binary);
  KILN_CHECK(file, what, " '", path, "': cannot be opened");
  std::ostringstream text;
  text << file.rdbuf();
  KILN_CHECK(!file.bad(), what, " '", path, "': read error");
  return text.str();
}

}  // namespace kiln
