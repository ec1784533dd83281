// LibraryOnFirstUse (library_on_first_use.h): dlopen once, by path then by soname.
#include "core/library_on_first_use.h"

#include <dlfcn.h>

#include "core/error.h"

namespace kiln {

void* LibraryOnFirstUse::handle() {
  std::call_once(once_, [this] {
    handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) handle_ = dlopen(soname_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      const char* why = dlerror();
      error_ = why != nullptr ? why : "unknown error";
    }
  });
  KILN_CHECK(handle_ != nullptr, what_, ": cannot load ", soname_, " (looked for ", path_,
             " and on the loader's search path): ", error_);
  return handle_;
}

void* LibraryOnFirstUse::symbol(const char* name) {
  void* address = dlsym(handle(), name);
  KILN_CHECK(address != nullptr, what_, ": ", soname_, " has no function ", name);
  return address;
}

bool LibraryOnFirstUse::available() {
  try {
    handle();
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace kiln
