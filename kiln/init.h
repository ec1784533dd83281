// kiln::init(): registers the backends this build has (the one place they are registered:
// no static-initializer tricks, docs/design.md). Call it once at program start; calling
// it again does nothing. Tests, examples and tools do; <kiln/kiln.h> includes this.
#pragma once

namespace kiln {

void init();

}  // namespace kiln
