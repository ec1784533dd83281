// The `kiln` executable: forwards its arguments to kiln::tools::run_kiln (tools/cli.h).
#include <iostream>
#include <string>
#include <vector>

#include "kiln/init.h"
#include "tools/cli.h"

int main(int argc, char** argv) {
  kiln::init();
  const std::vector<std::string> args(argv + 1, argv + argc);
  return kiln::tools::run_kiln(args, std::cout, std::cerr);
}
