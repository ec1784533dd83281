// Dims (Note [Dims in place] in core/dims.h): a vector-like list that keeps up to kInline
// values in place. Every operation is checked against std::vector doing the same, on both
// sides of the inline limit, and across the moves between in place and on the heap.
#include "core/dims.h"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

namespace kiln {
namespace {

std::vector<int64_t> counting(size_t n, int64_t from = 1) {
  std::vector<int64_t> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = from + static_cast<int64_t>(i);
  return values;
}

// The sizes around the limit: empty, in place, exactly full, one past, far past.
const std::vector<size_t> kCounts = {0, 1, Dims::kInline - 1, Dims::kInline, Dims::kInline + 1, 3 * Dims::kInline};

TEST(Dims, HoldsWhatItWasMadeFromOnBothSidesOfTheInlineLimit) {
  for (const size_t n : kCounts) {
    const std::vector<int64_t> expected = counting(n);
    const Dims from_vector = expected;
    const Dims from_range(expected.begin(), expected.end());
    const Dims from_span{IntList(expected)};
    for (const Dims* dims : {&from_vector, &from_range, &from_span}) {
      EXPECT_EQ(dims->size(), n);
      EXPECT_EQ(dims->empty(), n == 0);
      EXPECT_EQ(*dims, expected);
      EXPECT_EQ(dims->vec(), expected);
      const std::vector<int64_t> converted = *dims;
      EXPECT_EQ(converted, expected);
    }
  }
  EXPECT_EQ(Dims({2, 3, 4}), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(Dims(size_t{3}), (std::vector<int64_t>{0, 0, 0}));  // a count, as std::vector's
  EXPECT_EQ(Dims(2, -1), (std::vector<int64_t>{-1, -1}));
}

TEST(Dims, CopiesAndMovesKeepTheValuesAndLeaveTheSourceUsable) {
  for (const size_t n : kCounts) {
    for (const size_t m : kCounts) {
      const Dims original = counting(n);
      Dims copy = counting(m, 100);
      copy = original;
      EXPECT_EQ(copy, original);
      Dims moved = counting(m, 200);
      Dims source = original;
      moved = std::move(source);
      EXPECT_EQ(moved, original);
      source.push_back(7);  // a moved-from Dims is empty and works
      EXPECT_EQ(source, (std::vector<int64_t>{7}));
      Dims constructed(std::move(moved));
      EXPECT_EQ(constructed, original);
      const Dims& same = copy;  // through a reference: a self-assignment the compilers allow
      copy = same;               // keeps the values
      EXPECT_EQ(copy, original);
    }
  }
}

TEST(Dims, EditsMatchStdVector) {
  for (const size_t n : kCounts) {
    for (size_t at = 0; at <= n; ++at) {
      std::vector<int64_t> expected = counting(n);
      Dims dims = expected;
      expected.insert(expected.begin() + static_cast<std::ptrdiff_t>(at), -5);
      dims.insert(dims.begin() + at, -5);
      EXPECT_EQ(dims, expected) << "insert at " << at << " of " << n;
      expected.erase(expected.begin() + static_cast<std::ptrdiff_t>(at));
      dims.erase(dims.begin() + at);
      EXPECT_EQ(dims, expected) << "erase at " << at << " of " << n;
      const std::vector<int64_t> more = counting(Dims::kInline, 50);
      expected.insert(expected.begin() + static_cast<std::ptrdiff_t>(at), more.begin(), more.end());
      dims.insert(dims.begin() + at, more.begin(), more.end());
      EXPECT_EQ(dims, expected) << "range insert at " << at << " of " << n;
    }
    std::vector<int64_t> expected = counting(n);
    Dims dims = expected;
    expected.resize(n + 3, 9);
    dims.resize(n + 3, 9);
    EXPECT_EQ(dims, expected);
    expected.resize(n / 2);
    dims.resize(n / 2);
    EXPECT_EQ(dims, expected);
    dims.clear();
    EXPECT_TRUE(dims.empty());
  }
}

// Inserting a list's own values into it (flatten does this with a tensor's sizes) must
// copy them before growing moves them.
TEST(Dims, InsertsItsOwnValues) {
  for (const size_t n : kCounts) {
    std::vector<int64_t> expected = counting(n);
    Dims dims = expected;
    expected.insert(expected.begin(), expected.begin(), expected.end());
    dims.insert(dims.begin(), dims.begin(), dims.end());
    EXPECT_EQ(dims, expected);
  }
}

TEST(Dims, FrontBackAndElementAccess) {
  Dims dims = counting(Dims::kInline + 2);
  EXPECT_EQ(dims.front(), 1);
  EXPECT_EQ(dims.back(), static_cast<int64_t>(Dims::kInline + 2));
  dims[3] = 42;
  EXPECT_EQ(dims[3], 42);
  dims.pop_back();
  EXPECT_EQ(dims.size(), Dims::kInline + 1);
}

TEST(Dims, PrintsAsAShape) {
  std::ostringstream os;
  os << Dims{2, 3, 4} << ' ' << Dims{} << ' ' << std::vector<int64_t>{5};
  EXPECT_EQ(os.str(), "[2, 3, 4] [] [5]");
}

}  // namespace
}  // namespace kiln
