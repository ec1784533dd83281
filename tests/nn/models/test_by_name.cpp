// Models by name (nn/models/by_name.h): every name builds the model its family's options
// describe, the options reach the model, and a wrong name or option is an error naming it.
#include <gtest/gtest.h>

#include "core/autograd/grad_mode.h"
#include "nn/models/by_name.h"
#include "nn/models/densenet3d.h"
#include "nn/models/resnet3d.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using nn::models::DenseNet3d;
using nn::models::model_by_name;
using nn::models::ModelSpec;
using nn::models::ResNet3d;

TEST(ModelByName, EveryNameBuildsItsFamilyAtItsDepth) {
  const std::vector<std::string> names = nn::models::model_names();
  ASSERT_EQ(names.size(), 11u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const auto model = model_by_name({.name = name, .num_classes = 3, .width = 0.0625});
    if (name.starts_with("resnet")) {
      const auto* resnet = dynamic_cast<const ResNet3d*>(model.get());
      ASSERT_NE(resnet, nullptr);
      EXPECT_EQ("resnet" + std::to_string(resnet->options().depth), name);
      EXPECT_EQ(resnet->options().num_classes, 3);
    } else {
      const auto* densenet = dynamic_cast<const DenseNet3d*>(model.get());
      ASSERT_NE(densenet, nullptr);
      EXPECT_EQ("densenet" + std::to_string(densenet->options().depth), name);
      EXPECT_EQ(densenet->options().growth_rate, 2);  // 32 x 0.0625
    }
  }
}

TEST(ModelByName, OptionsReachTheModel) {
  const auto resnet = model_by_name({.name = "resnet18",
                                     .stem = "medicalnet",
                                     .width = 0.5,
                                     .dropout = 0.2,
                                     .checkpoint_activations = true});
  const auto& options = dynamic_cast<const ResNet3d&>(*resnet).options();
  EXPECT_EQ(options.family, nn::models::ResNet3dFamily::MedicalNet);
  EXPECT_EQ(options.widen_factor, 0.5);
  EXPECT_EQ(options.dropout, 0.2);
  EXPECT_TRUE(options.checkpoint_stages);
  EXPECT_EQ(options.dilated_layers, false);  // a classifier, not Med3D's segmentation backbone

  const auto densenet = model_by_name({.name = "densenet121",
                                       .stem = "small",
                                       .memory_efficient = true,
                                       .depthwise_separable = true,
                                       .activation = "swish"});
  const auto& dense = dynamic_cast<const DenseNet3d&>(*densenet).options();
  EXPECT_EQ(dense.stem, nn::models::DenseNet3dStem::SmallInput);
  EXPECT_TRUE(dense.memory_efficient);
  EXPECT_TRUE(dense.depthwise_separable);
  EXPECT_EQ(dense.activation, nn::models::DenseNet3dActivation::Swish);
  EXPECT_EQ(dense.init_features, 64);
}

TEST(ModelByName, TheDefaultResNet18IsMedMnistsBenchmarkModel) {
  const auto model = model_by_name({});
  EXPECT_EQ(nn::parameter_count(*model), nn::parameter_count(ResNet3d({.depth = 18})));
  NoGradGuard no_grad;
  model->eval();
  EXPECT_EQ(model->forward(zeros({1, 1, 28, 28, 28})).sizes(), (std::vector<int64_t>{1, 2}));
}

TEST(ModelByName, WrongNamesAndOptionsAreErrors) {
  EXPECT_KILN_ERROR(model_by_name({.name = "resnet19"}), "unknown model 'resnet19'", "resnet18, resnet34",
                    "densenet264");
  EXPECT_KILN_ERROR(model_by_name({.name = "vgg16"}), "unknown model 'vgg16'");
  EXPECT_KILN_ERROR(model_by_name({.name = "resnet18", .stem = "small"}), "resnet18",
                    "medmnist or medicalnet", "'small'");
  EXPECT_KILN_ERROR(model_by_name({.name = "resnet18", .activation = "swish"}), "resnet18",
                    "DenseNet options");
  EXPECT_KILN_ERROR(model_by_name({.name = "densenet121", .activation = "gelu"}), "relu, swish or prelu",
                    "'gelu'");
  EXPECT_KILN_ERROR(model_by_name({.name = "densenet121", .stem = "medicalnet"}), "standard or small");
  EXPECT_KILN_ERROR(model_by_name({.name = "densenet121", .width = 0}), "width must be positive");
}

}  // namespace
}  // namespace kiln
