// Philox4x32-10 (core/philox.h), the Generator bookkeeping and Note [Philox streams]
// (core/generator.h).
//
// The block function is checked against the published known-answer vectors of Random123
// (Salmon et al.; tests/kat_vectors, the three "philox4x32 10" lines). The stream mapping
// is pinned by recomputing rand/randn/randint/bernoulli/randperm by hand from the block
// function, with a seed and an offset that both use their high 32 bits, so that a change
// in how elements map to counters cannot slip through: it would change every tensor a
// seed produces, on every device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/ops.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

struct KnownAnswer {
  Philox4x32 counter;
  uint32_t key0, key1;
  Philox4x32 expected;
};

// Random123 kat_vectors, "philox4x32 10 <counter x4> <key x2>   <output x4>".
const KnownAnswer kKnownAnswers[] = {
    {{{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u}}, 0x00000000u, 0x00000000u,
     {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
    {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
     {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
    {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
     {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
};

TEST(Philox, KnownAnswerVectors) {
  for (const KnownAnswer& kat : kKnownAnswers) {
    const Philox4x32 out = philox4x32_10(kat.counter, kat.key0, kat.key1);
    for (int w = 0; w < 4; ++w) {
      EXPECT_EQ(out.v[w], kat.expected.v[w]) << "word " << w << " of counter 0x" << std::hex << kat.counter.v[0];
    }
  }
}

TEST(Philox, MulHiLo) {
  uint32_t hi, lo;
  philox_mulhilo(0xffffffffu, 0xffffffffu, hi, lo);
  EXPECT_EQ(hi, 0xfffffffeu);
  EXPECT_EQ(lo, 0x00000001u);
  philox_mulhilo(0xD2511F53u, 2u, hi, lo);
  EXPECT_EQ(hi, 1u);
  EXPECT_EQ(lo, 0xA4A23EA6u);
}

// ---- Generator ------------------------------------------------------------------------

TEST(Generator, ManualSeedResetsTheOffset) {
  Generator g(5);
  EXPECT_EQ(g.seed(), 5u);
  EXPECT_EQ(g.offset(), 0u);
  g.reserve(10);
  EXPECT_EQ(g.offset(), 5u);
  g.manual_seed(77);
  EXPECT_EQ(g.seed(), 77u);
  EXPECT_EQ(g.offset(), 0u);
  EXPECT_EQ(Generator().seed(), kDefaultSeed);
}

TEST(Generator, ReserveAdvancesByHalfTheElementsRoundedUp) {
  Generator g(9);
  const PhiloxState first = g.reserve(5);  // 5 elements: 3 blocks of two
  EXPECT_EQ(first.seed, 9u);
  EXPECT_EQ(first.offset, 0u);
  EXPECT_EQ(g.offset(), 3u);
  EXPECT_EQ(g.reserve(4).offset, 3u);
  EXPECT_EQ(g.offset(), 5u);
  EXPECT_EQ(g.reserve(0).offset, 5u);
  EXPECT_EQ(g.offset(), 5u);
  EXPECT_EQ(g.reserve(1).offset, 5u);
  EXPECT_EQ(g.offset(), 6u);
  EXPECT_EQ(g.reserve(1'000'001).offset, 6u);
  EXPECT_EQ(g.offset(), 6u + 500'001u);
}

TEST(Generator, StateRoundTrips) {
  Generator g(1);
  g.set_state({0x123456789abcdef0ull, 0x100000003ull});
  EXPECT_EQ(g.seed(), 0x123456789abcdef0ull);
  EXPECT_EQ(g.offset(), 0x100000003ull);
  const PhiloxState s = g.state();
  EXPECT_EQ(s.seed, 0x123456789abcdef0ull);
  EXPECT_EQ(s.offset, 0x100000003ull);
}

TEST(Generator, GlobalManualSeedSeedsEveryDeviceIncludingLaterOnes) {
  Generator& cpu = default_generator(Device::cpu());
  EXPECT_EQ(&cpu, &default_generator(Device::cpu())) << "one generator per device";
  cpu.reserve(100);
  manual_seed(2024);
  EXPECT_EQ(cpu.seed(), 2024u);
  EXPECT_EQ(cpu.offset(), 0u);
  // A device whose generator did not exist yet (naming a CUDA device needs no GPU).
  Generator& fresh = default_generator(Device::cuda(7));
  EXPECT_EQ(fresh.seed(), 2024u);
  EXPECT_EQ(fresh.offset(), 0u);
  EXPECT_NE(&fresh, &cpu);
  // Re-seeding reaches it too; the same seed then gives the same numbers on the CPU.
  fresh.reserve(3);
  manual_seed(31);
  EXPECT_EQ(fresh.seed(), 31u);
  EXPECT_EQ(fresh.offset(), 0u);
  const Tensor a = rand({6});
  manual_seed(31);
  EXPECT_TRUE(testing::all_equal(rand({6}), a));
  manual_seed(kDefaultSeed);  // leave the process as it started
}

// ---- Note [Philox streams], by hand ---------------------------------------------------

// A seed and a starting offset with non-zero high words.
constexpr PhiloxState kState{0xfedcba9876543210ull, 0x00000002fffffffeull};

// The words of element i, spelled out from the note: block = offset + i / 2, counter =
// (lo32(block), hi32(block), 0, 0), key = (lo32(seed), hi32(seed)), lane pair i % 2.
void words_by_hand(uint64_t i, uint32_t& r0, uint32_t& r1) {
  const uint64_t block = kState.offset + i / 2;
  const Philox4x32 counter = {{static_cast<uint32_t>(block & 0xffffffffu), static_cast<uint32_t>(block >> 32), 0, 0}};
  const Philox4x32 out = philox4x32_10(counter, static_cast<uint32_t>(kState.seed & 0xffffffffu),
                                       static_cast<uint32_t>(kState.seed >> 32));
  r0 = out.v[i % 2 == 0 ? 0 : 2];
  r1 = out.v[i % 2 == 0 ? 1 : 3];
}

TEST(PhiloxStreams, SharedHelperMatchesTheNote) {
  for (uint64_t i = 0; i < 9; ++i) {
    uint32_t r0, r1, h0, h1;
    philox_words(kState, i, r0, r1);
    words_by_hand(i, h0, h1);
    EXPECT_EQ(r0, h0) << i;
    EXPECT_EQ(r1, h1) << i;
  }
}

TEST(PhiloxStreams, RandFloat32) {
  Generator g;
  g.set_state(kState);
  const std::vector<float> got = rand({5}, {.dtype = DType::Float32}, &g).to_vector<float>();
  for (uint64_t i = 0; i < 5; ++i) {
    uint32_t r0, r1;
    words_by_hand(i, r0, r1);
    EXPECT_EQ(got[i], static_cast<float>(std::ldexp(static_cast<double>(r0 >> 8), -24))) << i;
  }
  EXPECT_EQ(g.offset(), kState.offset + 3);
}

// Float16 and bfloat16 keep only as many bits as their significand holds, so a draw is
// exact in the type and cannot round up to 1.
TEST(PhiloxStreams, RandHalfAndBFloat16UseTheirSignificandBits) {
  Generator g;
  g.set_state(kState);
  const std::vector<float> halves = rand({5}, {.dtype = DType::Float16}, &g).to_vector<float>();
  g.set_state(kState);
  const std::vector<float> bf16s = rand({5}, {.dtype = DType::BFloat16}, &g).to_vector<float>();
  for (uint64_t i = 0; i < 5; ++i) {
    uint32_t r0, r1;
    words_by_hand(i, r0, r1);
    EXPECT_EQ(halves[i], static_cast<float>(std::ldexp(static_cast<double>(r0 >> 21), -11))) << i;
    EXPECT_EQ(bf16s[i], static_cast<float>(std::ldexp(static_cast<double>(r0 >> 24), -8))) << i;
  }
}

TEST(PhiloxStreams, RandFloat64) {
  Generator g;
  g.set_state(kState);
  const std::vector<double> got = rand({5}, {.dtype = DType::Float64}, &g).to_vector<double>();
  for (uint64_t i = 0; i < 5; ++i) {
    uint32_t r0, r1;
    words_by_hand(i, r0, r1);
    const uint64_t bits53 = ((static_cast<uint64_t>(r0) << 32) | r1) >> 11;
    EXPECT_EQ(got[i], std::ldexp(static_cast<double>(bits53), -53)) << i;
  }
}

TEST(PhiloxStreams, RandnFloat64) {
  Generator g;
  g.set_state(kState);
  const std::vector<double> got = randn({5}, {.dtype = DType::Float64}, &g).to_vector<double>();
  for (uint64_t i = 0; i < 5; ++i) {
    uint32_t r0, r1;
    words_by_hand(i, r0, r1);
    const double u1 = (static_cast<double>(r0) + 1.0) / 4294967296.0;
    const double u2 = static_cast<double>(r1) / 4294967296.0;
    const double expected = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
    EXPECT_NEAR(got[i], expected, 1e-12) << i;
  }
}

TEST(PhiloxStreams, RandintAndBernoulli) {
  Generator g;
  g.set_state(kState);
  const std::vector<int64_t> ints = randint(-5, 1000, {5}, {}, &g).to_vector<int64_t>();
  Generator g2;
  g2.set_state(kState);
  const std::vector<float> coins = bernoulli({5}, 0.3, {}, &g2).to_vector<float>();
  for (uint64_t i = 0; i < 5; ++i) {
    uint32_t r0, r1;
    words_by_hand(i, r0, r1);
    const uint64_t r = (static_cast<uint64_t>(r0) << 32) | r1;
    EXPECT_EQ(ints[i], -5 + static_cast<int64_t>(r % 1005)) << i;
    EXPECT_EQ(coins[i], (r0 >> 8) * 0x1p-24 < 0.3 ? 1.0f : 0.0f) << i;
  }
}

TEST(PhiloxStreams, RandpermSortsTheKeys) {
  Generator g;
  g.set_state(kState);
  const std::vector<int64_t> got = randperm(7, {}, &g).to_vector<int64_t>();
  std::vector<uint64_t> keys(7);
  for (uint64_t i = 0; i < 7; ++i) {
    uint32_t r0, r1;
    words_by_hand(i, r0, r1);
    keys[i] = (static_cast<uint64_t>(r0) << 32) | r1;
  }
  std::vector<int64_t> expected(7);
  std::iota(expected.begin(), expected.end(), 0);
  std::stable_sort(expected.begin(), expected.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  EXPECT_EQ(got, expected);
  EXPECT_EQ(g.offset(), kState.offset + 4);
}

// Two calls on one generator continue the stream: the second starts where the first
// stopped, so rand(3) then rand(4) is not rand(7) (an odd count wastes half a block).
TEST(PhiloxStreams, ConsecutiveCallsUseConsecutiveBlocks) {
  Generator g;
  g.set_state(kState);
  const std::vector<double> first = rand({4}, {.dtype = DType::Float64}, &g).to_vector<double>();
  const std::vector<double> second = rand({4}, {.dtype = DType::Float64}, &g).to_vector<double>();
  Generator whole;
  whole.set_state(kState);
  const std::vector<double> both = rand({8}, {.dtype = DType::Float64}, &whole).to_vector<double>();
  EXPECT_EQ(first, std::vector<double>(both.begin(), both.begin() + 4));
  EXPECT_EQ(second, std::vector<double>(both.begin() + 4, both.end()));
}

}  // namespace
}  // namespace kiln
