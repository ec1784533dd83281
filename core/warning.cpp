// warn_once (warning.h): the keys seen and the sink, under one mutex.
#include "core/warning.h"

#include <iostream>
#include <mutex>
#include <set>

namespace kiln {
namespace {

std::mutex g_mutex;
std::set<std::string> g_warned;
WarningSink g_sink;

}  // namespace

void warn_once(const std::string& key, const std::string& message) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_warned.insert(key).second) return;
  if (g_sink) {
    g_sink(message);
  } else {
    std::cerr << "warning: " << message << std::endl;
  }
}

WarningSink set_warning_sink(WarningSink sink) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  WarningSink previous = std::move(g_sink);
  g_sink = std::move(sink);
  return previous;
}

}  // namespace kiln
