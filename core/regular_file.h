// The check a reader makes before it opens a path by name: the path must be a regular file
// (or a link to one). A pipe would block the reader until someone writes to it, /dev/zero
// would never end, and a folder is no file. The check looks at the path without opening it;
// a missing path, one that cannot be examined and one of another kind are each a
// kiln::Error naming `what` and the path. (Readers that open the file themselves, such as
// core/byte_source.h's FileSource, check the descriptor they hold instead.)
//
//   check_regular_file(path, "volume file");  // "volume file 'a.nii': no such file"
#pragma once

#include <string>
#include <string_view>

namespace kiln {

void check_regular_file(const std::string& path, std::string_view what);

}  // namespace kiln
