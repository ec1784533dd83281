// The `kiln` executable: forwards its arguments to kiln::tools::run_kiln (tools/cli.h).
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "kiln/init.h"
#include "kiln/openmp_waits.h"
#include "tools/cli.h"

int main(int argc, char** argv) {
  kiln::use_short_openmp_spins(argv);  // Note [OpenMP under load]
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    kiln::init();
  } catch (const kiln::Error& error) {
    // A CPU without the instructions this build uses (Note [Instruction set]): `kiln info`
    // still prints what the build uses and what the CPU lacks; anything else stops here.
    if (args.empty() || args[0] != "info") {
      std::cerr << "kiln: " << error.what() << "\n";
      return 1;
    }
  }
  return kiln::tools::run_kiln(args, std::cout, std::cerr);
}
