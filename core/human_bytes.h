// human_bytes: a byte count for people, "1023 B", "1.5 KiB", "3.0 GiB" (binary units, one
// decimal). The one formatter of sizes in messages: the caching allocators' out-of-memory
// errors and the `kiln` command's tables use it.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

std::string human_bytes(uint64_t bytes);

}  // namespace kiln
