// check_regular_file (core/regular_file.h): std::filesystem::status, which follows links
// and opens nothing.
#include "core/regular_file.h"

#include <filesystem>

#include "core/error.h"

namespace kiln {

void check_regular_file(const std::string& path, std::string_view what) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  const bool missing = status.type() == std::filesystem::file_type::not_found;
  KILN_CHECK(!error || missing, what, " '", path, "': cannot be examined: ", error.message());
  KILN_CHECK(!missing, what, " '", path, "': no such file");
  KILN_CHECK(status.type() == std::filesystem::file_type::regular, what, " '", path,
             "': not a regular file (a folder, a pipe or a device)");
}

}  // namespace kiln
