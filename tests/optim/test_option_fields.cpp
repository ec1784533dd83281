// optim/option_fields.h: an options struct and a parameter group's named values convert
// both ways through one field table; a flag must be 0 or 1 and a missing option is an
// error naming the optimizer; and the optimizers read their groups through it (a flag set
// to 2 by name is refused when the group is added, as PyTorch refuses a non-bool).
#include <gtest/gtest.h>

#include "core/ops.h"
#include "optim/optim.h"
#include "optim/option_fields.h"
#include "tests/test_util.h"

namespace kiln::optim {
namespace {

struct ToyOptions {
  double lr = 0.5;
  bool nesterov = false;
};

constexpr OptionField<ToyOptions> kToyFields[] = {number_option("lr", &ToyOptions::lr),
                                                  flag_option("nesterov", &ToyOptions::nesterov)};

TEST(OptionFields, StructAndNamesRoundTrip) {
  const Options named = to_options<ToyOptions>(ToyOptions{.lr = 0.25, .nesterov = true}, kToyFields);
  EXPECT_EQ(named, (Options{{"lr", 0.25}, {"nesterov", 1.0}}));
  const ToyOptions back = from_options<ToyOptions>("Toy", named, kToyFields);
  EXPECT_EQ(back.lr, 0.25);
  EXPECT_TRUE(back.nesterov);
}

TEST(OptionFields, AFlagMustBeZeroOrOneAndEveryOptionMustBeThere) {
  EXPECT_KILN_ERROR(from_options<ToyOptions>("Toy", {{"lr", 1.0}, {"nesterov", 2.0}}, kToyFields),
                    "Toy: option nesterov is a flag, 0 or 1, got 2");
  EXPECT_KILN_ERROR(from_options<ToyOptions>("Toy", {{"lr", 1.0}}, kToyFields),
                    "Toy: parameter group has no option \"nesterov\"");
}

TEST(OptionFields, OptimizersCheckFlagsOfTheirGroups) {
  const Tensor w = zeros({2}).requires_grad_(true);
  EXPECT_KILN_ERROR(Adam({ParamGroup{.params = {w}, .options = {{"amsgrad", 2.0}}}}),
                    "Adam: option amsgrad is a flag, 0 or 1, got 2");
  EXPECT_KILN_ERROR(SGD({ParamGroup{.params = {w}, .options = {{"nesterov", 0.5}}}}),
                    "SGD: option nesterov is a flag");
  EXPECT_KILN_ERROR(RMSprop({ParamGroup{.params = {w}, .options = {{"centered", -1.0}}}}),
                    "RMSprop: option centered is a flag");
}

TEST(OptionFields, ADefaultsStructBecomesTheGroupsNamedOptions) {
  const Tensor w = zeros({2}).requires_grad_(true);
  const AdamW adamw({w}, AdamWOptions{.lr = 0.01, .beta2 = 0.95, .amsgrad = true});
  const Options& o = adamw.param_groups()[0].options;
  EXPECT_EQ(o.at("lr"), 0.01);
  EXPECT_EQ(o.at("beta1"), 0.9);
  EXPECT_EQ(o.at("beta2"), 0.95);
  EXPECT_EQ(o.at("weight_decay"), 1e-2);  // AdamW's own default
  EXPECT_EQ(o.at("amsgrad"), 1.0);
  EXPECT_EQ(o.at("maximize"), 0.0);
}

}  // namespace
}  // namespace kiln::optim
