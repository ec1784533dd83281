// Warnings from deep inside the library, where no caller's stream is at hand (a loader
// thread reading a file): each is written once per key for the process, as one line
// "warning: ..." on stderr, or given to the sink a program (or a test) installs.
//
//   warn_once(path, path + ": 12 NaN voxels were read as 0");
//   WarningSink previous = set_warning_sink([&](const std::string& line) { lines.push_back(line); });
#pragma once

#include <functional>
#include <string>

namespace kiln {

using WarningSink = std::function<void(const std::string& message)>;

// The first call with a key passes `message` on; later ones with that key do nothing.
// Safe from any thread.
void warn_once(const std::string& key, const std::string& message);

// Installs `sink` (null: stderr again) and returns the one it replaces.
WarningSink set_warning_sink(WarningSink sink);

}  // namespace kiln
