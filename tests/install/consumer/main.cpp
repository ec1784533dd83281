// kiln_consumer: a user's program, built against an installed Kiln only (tests/install/).
// It includes nothing but <kiln/kiln.h> (which must therefore compile on its own from the
// installed headers) and checks, with numbers exact in float32: an op with autograd, an
// nn::Linear with MSELoss, and one SGD step. Prints what is wrong and returns 1 on a wrong
// answer; prints "kiln_consumer: ok" otherwise.
#include <kiln/kiln.h>

#include <cstdio>
#include <vector>

namespace {

int failures = 0;

void expect(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
  if (got == want) return;
  ++failures;
  std::printf("kiln_consumer: %s is wrong:", what);
  for (const float v : got) std::printf(" %g", v);
  std::printf(" (want");
  for (const float v : want) std::printf(" %g", v);
  std::printf(")\n");
}

}  // namespace

int main() {
  kiln::init();
  const kiln::BuildInfo info = kiln::build_info();
  std::printf("kiln_consumer: Kiln %s, CUDA backend built: %s\n", info.version.c_str(),
              info.cuda_built ? "yes" : "no");
#ifdef KILN_CONSUMER_EXPECT_CUDA
  // The package's Kiln_WITH_CUDA must describe the library it imported.
  if (info.cuda_built != static_cast<bool>(KILN_CONSUMER_EXPECT_CUDA)) {
    std::printf("kiln_consumer: KilnConfig.cmake's Kiln_WITH_CUDA disagrees with build_info()\n");
    ++failures;
  }
#endif

  // d/dx sum(x * x) = 2x.
  kiln::Tensor x = kiln::tensor<float>({1, 2, 3}).requires_grad_(true);
  kiln::Tensor y = kiln::mul(x, x).sum();
  y.backward();
  expect("sum(x * x)", {y.item<float>()}, {14});
  expect("its gradient", x.grad().to_vector<float>(), {2, 4, 6});

  // out = 2 * 1 + 1 * (-1) + 0.5 = 1.5; loss = (1.5 - 1)^2 = 0.25, d loss/d out = 1, so
  // grad W = input = [2, 1] and grad b = 1; SGD with lr 0.5 leaves W = [0, -1.5], b = 0.
  kiln::nn::Linear linear({.in_features = 2, .out_features = 1});
  {
    kiln::NoGradGuard no_grad;
    linear.weight.copy_(kiln::tensor<float>({1, -1}, {1, 2}));
    linear.bias.fill_(0.5);
  }
  kiln::optim::SGD sgd(linear.parameters(), {.lr = 0.5});
  kiln::nn::MSELoss mse;
  kiln::Tensor loss = mse.forward(linear.forward(kiln::tensor<float>({2, 1}, {1, 2})),
                                  kiln::tensor<float>({1}, {1, 1}));
  loss.backward();
  expect("the MSE loss", {loss.item<float>()}, {0.25f});
  sgd.step();
  expect("the weight after one SGD step", linear.weight.to_vector<float>(), {0, -1.5f});
  expect("the bias after one SGD step", linear.bias.to_vector<float>(), {0});

  if (failures == 0) std::printf("kiln_consumer: ok\n");
  return failures == 0 ? 0 : 1;
}
