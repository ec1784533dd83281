// kiln::init(): registers the backends this build has (the one place they are registered;
// DESIGN.md: no static-initializer tricks). Call it once at program start; calling it
// again does nothing. Tests, examples and tools do.
#pragma once

namespace kiln {

void init();

}  // namespace kiln
