// fit_line: the README's example, kept compiling. Fits y = 2 x0 with a 3 -> 1 linear map
// by gradient descent and prints the learned weights (they approach [2, 0, 0]).
#include <cstdio>

#include "kiln/kiln.h"  // everything a user needs: <kiln/kiln.h> once installed

using namespace kiln;

int main() {
  kiln::init();  // register the backends, once
  manual_seed(0);
  Tensor x = randn({64, 3});
  Tensor w = randn({3, 1}).requires_grad_(true);
  Tensor y = mul(x.select(1, 0), 2.0).unsqueeze(1);  // a target to fit
  for (int step = 0; step < 100; ++step) {
    Tensor loss = square(sub(matmul(x, w), y)).mean();
    loss.backward();
    NoGradGuard no_grad;  // the update is not part of the graph
    w.sub_(w.grad(), 0.1);
    w.set_grad(Tensor());  // gradients set to None
  }
  std::printf("learned w = [%.4f, %.4f, %.4f]\n", w.select(0, 0).item<double>(), w.select(0, 1).item<double>(),
              w.select(0, 2).item<double>());
  return 0;
}
