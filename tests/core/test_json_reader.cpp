// The pull reader (core/json_reader.h): values pulled in order, integers told from numbers
// before they are read, a read of the wrong type refused, the grammar checked whatever
// the caller asks (separators, keys, trailing text), skip_value checking what it skips
// within the depth limit, its errors ParseErrors with their byte offset, and calls out of
// turn caught as Kiln bugs. json::parse is tested on top of it in test_json.cpp.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/json_reader.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using json::Reader;
using json::Type;

TEST(JsonReader, PullsValuesInOrder) {
  Reader reader(R"( {"shape": [2, 3], "name": "w\u00e9", "scale": 0.5, "on": true, "none": null} )");
  ASSERT_EQ(reader.peek(), Type::Object);
  reader.begin_object();
  EXPECT_EQ(reader.next_key(), "shape");
  ASSERT_EQ(reader.peek(), Type::Array);
  reader.begin_array();
  std::vector<int64_t> shape;
  while (reader.next_item()) shape.push_back(reader.read_integer());
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(reader.next_key(), "name");
  EXPECT_EQ(reader.read_string(), "w\xC3\xA9");
  EXPECT_EQ(reader.next_key(), "scale");
  EXPECT_EQ(reader.peek(), Type::Number);
  EXPECT_EQ(reader.read_number(), 0.5);
  EXPECT_EQ(reader.next_key(), "on");
  EXPECT_TRUE(reader.read_bool());
  EXPECT_EQ(reader.next_key(), "none");
  EXPECT_EQ(reader.peek(), Type::Null);
  reader.read_null();
  EXPECT_EQ(reader.next_key(), std::nullopt);
  reader.finish();
}

TEST(JsonReader, PeekTellsIntegersFromNumbers) {
  const std::pair<const char*, Type> cases[] = {
      {"0", Type::Integer}, {"-12", Type::Integer}, {"1.0", Type::Number}, {"1e3", Type::Number},
      {"-0.5E-2", Type::Number}, {"\"1\"", Type::String}, {"[]", Type::Array}, {"{}", Type::Object},
      {"false", Type::Bool}, {"null", Type::Null},
  };
  for (const auto& [text, type] : cases) EXPECT_EQ(Reader(text).peek(), type) << text;
  // An integer reads as a number too (as Value::as_number), exactly as an int64 first.
  EXPECT_EQ(Reader("9007199254740993").read_number(), 9007199254740992.0);
}

TEST(JsonReader, ReadingTheWrongTypeIsAnError) {
  EXPECT_KILN_ERROR(Reader("  \"3\"").read_integer(), "json: expected an integer, found a string at byte 2");
  EXPECT_KILN_ERROR(Reader("1.5").read_integer(), "expected an integer, found a number");
  EXPECT_KILN_ERROR(Reader("[1]").read_string(), "expected a string, found an array");
  EXPECT_KILN_ERROR(Reader("{}").begin_array(), "expected an array, found an object");
  EXPECT_KILN_ERROR(Reader("null").read_bool(), "expected a boolean, found a null");
}

TEST(JsonReader, ChecksTheGrammarWhateverTheCallerAsks) {
  Reader missing_comma("[1 2]");
  missing_comma.begin_array();
  EXPECT_TRUE(missing_comma.next_item());
  EXPECT_EQ(missing_comma.read_integer(), 1);
  EXPECT_KILN_ERROR(missing_comma.next_item(), "expected ',' or ']' in an array, found '2' at byte 3");

  Reader trailing_comma("{\"a\":1,}");
  trailing_comma.begin_object();
  EXPECT_EQ(trailing_comma.next_key(), "a");
  EXPECT_EQ(trailing_comma.read_integer(), 1);
  EXPECT_KILN_ERROR(trailing_comma.next_key(), "expected a string key at byte 7");

  Reader duplicate("{\"k\":1,\"\\u006b\":2}");  // the same key, escaped
  duplicate.begin_object();
  duplicate.next_key();
  duplicate.read_integer();
  EXPECT_KILN_ERROR(duplicate.next_key(), "duplicate key \"k\" at byte 7");

  Reader trailing_text("7 8");
  EXPECT_EQ(trailing_text.read_integer(), 7);
  EXPECT_KILN_ERROR(trailing_text.finish(), "unexpected '8' after the value at byte 2");

  Reader truncated("[");
  truncated.begin_array();
  EXPECT_TRUE(truncated.next_item());
  EXPECT_KILN_ERROR(truncated.peek(), "unexpected end of text, expected a value at byte 1");
}

TEST(JsonReader, SkipValueChecksWhatItSkips) {
  Reader reader(R"({"skip": {"a": [1, {"b": [true, null, "x", -2.5e3]}], "c": {}}, "keep": 4})");
  reader.begin_object();
  EXPECT_EQ(reader.next_key(), "skip");
  reader.skip_value();
  EXPECT_EQ(reader.next_key(), "keep");
  EXPECT_EQ(reader.read_integer(), 4);
  EXPECT_EQ(reader.next_key(), std::nullopt);
  reader.finish();

  EXPECT_KILN_ERROR(Reader(R"([{"x": 1, "x": 2}])").skip_value(), "duplicate key \"x\" at byte 10");
  EXPECT_KILN_ERROR(Reader("[\"\xFF\"]").skip_value(), "invalid UTF-8 byte \\xff in a string at byte 2");
  EXPECT_KILN_ERROR(Reader("[99999999999999999999]").skip_value(), "does not fit in 64 bits", "at byte 1");
  EXPECT_KILN_ERROR(Reader("[1e999]").skip_value(), "number 1e999 is out of range");
  EXPECT_KILN_ERROR(Reader("[1,]").skip_value(), "unexpected ']', expected a value at byte 3");
  EXPECT_KILN_ERROR(Reader(std::string(100'000, '[')).skip_value(), "nesting deeper than 64 levels at byte 64");
}

TEST(JsonReader, ProblemsWithTheTextAreParseErrors) {
  Reader trailing("{} x");
  trailing.skip_value();
  EXPECT_THROW(trailing.finish(), json::ParseError);
  EXPECT_THROW(Reader("[1, 2, 3]", {.max_bytes = 4}), json::ParseError);
  EXPECT_KILN_ERROR(Reader("[1, 2, 3]", {.max_bytes = 4}), "json: text of 9 bytes exceeds the limit of 4 bytes");
  EXPECT_THROW(Reader("[[1]]", {.max_depth = 1}).skip_value(), json::ParseError);
  try {
    Reader("\"a\\qb\"").read_string();
    ADD_FAILURE() << "no error";
  } catch (const json::ParseError& e) {
    EXPECT_EQ(std::string(e.what()), "json: invalid escape '\\q' at byte 3");
  }
}

TEST(JsonReader, CallsOutOfTurnAreKilnBugs) {
  EXPECT_KILN_ERROR(Reader("{}").next_key(), "internal error", "next_key() outside an object");
  Reader reader("[1]");
  reader.begin_array();
  EXPECT_KILN_ERROR(reader.read_integer(), "internal error");  // next_item() first
  EXPECT_KILN_ERROR(Reader("1").finish(), "internal error", "finish() before the value was read");
}

}  // namespace
}  // namespace kiln
