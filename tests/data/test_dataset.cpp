// Datasets (data/dataset.h): Sample lookup, Subset, ConcatDataset and random_split (by
// lengths and by fractions, PyTorch's remainder rule), with their errors; and MD5
// (data/md5.h) against RFC 1321's test suite.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/dataset.h"
#include "data/md5.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using data::Dataset;
using data::Sample;

// Sample i holds the int64 scalar `offset + i`.
class Numbers final : public Dataset {
 public:
  Numbers(int64_t n, int64_t offset = 0) : n_(n), offset_(offset) {}
  int64_t size() const override { return n_; }
  Sample get(int64_t index) const override {
    check_index(index);
    return {.tensors = {{"x", full({}, offset_ + index, {.dtype = DType::Int64})}}, .metadata = {}};
  }
  std::string name() const override { return "Numbers"; }

 private:
  int64_t n_, offset_;
};

int64_t value(const Dataset& d, int64_t i) { return d.get(i).at("x").item<int64_t>(); }

TEST(Dataset, SampleLookupNamesWhatIsThere) {
  const Sample s = Numbers(3).get(1);
  EXPECT_EQ(s.at("x").item<int64_t>(), 1);
  EXPECT_KILN_ERROR(s.at("image"), "sample has no tensor 'image' (it has: x)");
  EXPECT_KILN_ERROR(Numbers(3).get(3), "Numbers: index 3 is out of range for 3 samples");
  EXPECT_KILN_ERROR(Numbers(3).get(-1), "index -1");
}

TEST(Dataset, SubsetAndConcat) {
  const auto base = std::make_shared<Numbers>(10);
  const data::Subset subset(base, {7, 2, 2});
  EXPECT_EQ(subset.size(), 3);
  EXPECT_EQ(value(subset, 0), 7);
  EXPECT_EQ(value(subset, 2), 2);
  EXPECT_KILN_ERROR(subset.get(3), "Subset of Numbers: index 3");
  EXPECT_KILN_ERROR(data::Subset(base, {10}), "index 10 is out of range for 10 samples");
  const data::ConcatDataset both({base, std::make_shared<Numbers>(0), std::make_shared<Numbers>(2, 100)});
  EXPECT_EQ(both.size(), 12);
  EXPECT_EQ(value(both, 9), 9);
  EXPECT_EQ(value(both, 10), 100);
  EXPECT_EQ(value(both, 11), 101);
  EXPECT_KILN_ERROR(both.get(12), "index 12 is out of range for 12 samples");
}

TEST(Dataset, RandomSplitIsADisjointCoverDrawnFromTheGenerator) {
  const auto base = std::make_shared<Numbers>(10);
  Generator first(5), second(5), other(6);
  const auto a = data::random_split(base, std::vector<int64_t>{3, 7}, first);
  const auto b = data::random_split(base, std::vector<int64_t>{3, 7}, second);
  const auto c = data::random_split(base, std::vector<int64_t>{3, 7}, other);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0]->size(), 3);
  EXPECT_EQ(a[1]->size(), 7);
  EXPECT_EQ(a[0]->indices(), b[0]->indices());  // same seed, same split
  EXPECT_NE(a[0]->indices(), c[0]->indices());
  std::vector<int64_t> all = a[0]->indices();
  all.insert(all.end(), a[1]->indices().begin(), a[1]->indices().end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // fractions: floors 3, 3, 3 and the one left over to the first subset
  const auto f = data::random_split(base, std::vector<double>{0.33, 0.33, 0.34}, first);
  EXPECT_EQ(f[0]->size(), 4);
  EXPECT_EQ(f[1]->size(), 3);
  EXPECT_EQ(f[2]->size(), 3);
  EXPECT_KILN_ERROR(data::random_split(base, std::vector<int64_t>{3, 3}, first),
                    "add up to 6 but Numbers has 10");
  EXPECT_KILN_ERROR(data::random_split(base, std::vector<double>{0.5, 0.6}, first), "must add up to 1");
}

// RFC 1321, appendix A.5; and a message fed in pieces that cross the 64-byte blocks.
TEST(Md5, MatchesTheRfcTestSuite) {
  const std::vector<std::pair<std::string, std::string>> suite = {
      {"", "d41d8cd98f00b204e9800998ecf8427e"},
      {"a", "0cc175b9c0f1b6a831c399e269772661"},
      {"abc", "900150983cd24fb0d6963f7d28e17f72"},
      {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
      {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
      {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"},
      {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
       "57edf4a22be3c955ac49da2e2107b67a"},
  };
  for (const auto& [message, digest] : suite) {
    data::Md5 whole;
    whole.update(message.data(), message.size());
    EXPECT_EQ(whole.hex_digest(), digest) << message;
    data::Md5 pieces;
    for (size_t at = 0; at < message.size(); at += 7)
      pieces.update(message.data() + at, std::min<size_t>(7, message.size() - at));
    EXPECT_EQ(pieces.hex_digest(), digest) << message;
  }
  const testing::TempFolder folder;
  std::ofstream(folder.file("m.txt")) << "message digest";
  EXPECT_EQ(data::md5_of_file(folder.file("m.txt")), "f96b697d7cb7938d525a2f31aaf161d0");
  EXPECT_KILN_ERROR(data::md5_of_file(folder.file("none")), "md5: cannot open");
}

}  // namespace
}  // namespace kiln
