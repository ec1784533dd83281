// split_list, split_names and joined (core/text_list.h): empty items kept or dropped as
// each promises, and a split list joined back.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/text_list.h"

namespace kiln {
namespace {

using Items = std::vector<std::string>;

TEST(TextList, SplitKeepsEveryItemEmptyOnesIncluded) {
  EXPECT_EQ(split_list(""), Items{});
  EXPECT_EQ(split_list("t1"), Items{"t1"});
  EXPECT_EQ(split_list("1,,2"), (Items{"1", "", "2"}));
  EXPECT_EQ(split_list(",a,"), (Items{"", "a", ""}));
  EXPECT_EQ(split_list("a;b c", ';'), (Items{"a", "b c"}));
}

TEST(TextList, SplitNamesDropsTheEmptyItems) {
  EXPECT_EQ(split_names("t1,,t2,"), (Items{"t1", "t2"}));
  EXPECT_EQ(split_names(",,"), Items{});
}

TEST(TextList, JoinedPutsTheSeparatorBetweenItemsOnly) {
  EXPECT_EQ(joined({}), "");
  EXPECT_EQ(joined({"sgd"}), "sgd");
  EXPECT_EQ(joined({"sgd", "adam", "adamw"}), "sgd, adam, adamw");
  EXPECT_EQ(joined({"", "b"}, "|"), "|b");
  EXPECT_EQ(joined(split_list("a,,b"), ","), "a,,b");
}

}  // namespace
}  // namespace kiln
