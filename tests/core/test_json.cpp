// JSON values, parse() and dump() (core/json.h): every value kind, exact 64-bit integers
// and their overflow, escapes with surrogate pairs, UTF-8 validation, duplicate keys, depth
// and size limits, error offsets, a compact Value, and serde_json-compatible output. The
// reader's own interface is tested in test_json_reader.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>

#include "core/json.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using json::Type;
using json::Value;

TEST(Json, ParsesEveryKindOfValue) {
  const Value v = json::parse(
      " {\"a\": [1, -2, 3.5, -0.25e2, 1E3], \"b\": true, \"c\": false, \"d\": null,"
      " \"e\": \"text\", \"f\": {}, \"g\": []}\n\t");
  ASSERT_TRUE(v.is(Type::Object));
  const auto& a = v.find("a")->as_array();
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].as_integer(), 1);
  EXPECT_EQ(a[1].as_integer(), -2);
  EXPECT_EQ(a[2].as_number(), 3.5);
  EXPECT_EQ(a[3].as_number(), -25.0);
  EXPECT_TRUE(a[4].is(Type::Number));
  EXPECT_EQ(a[4].as_number(), 1000.0);
  EXPECT_TRUE(v.find("b")->as_bool());
  EXPECT_FALSE(v.find("c")->as_bool());
  EXPECT_TRUE(v.find("d")->is(Type::Null));
  EXPECT_EQ(v.find("e")->as_string(), "text");
  EXPECT_TRUE(v.find("f")->as_object().empty());
  EXPECT_TRUE(v.find("g")->as_array().empty());
  EXPECT_EQ(v.find("missing"), nullptr);
  // Members keep their order.
  EXPECT_EQ(v.as_object()[4].first, "e");
}

TEST(Json, IntegersAreExactAndOverflowIsAnError) {
  EXPECT_EQ(json::parse("9223372036854775807").as_integer(), INT64_MAX);
  EXPECT_EQ(json::parse("-9223372036854775808").as_integer(), INT64_MIN);
  EXPECT_EQ(json::parse("9007199254740993").as_integer(), 9007199254740993);  // not a double
  EXPECT_KILN_ERROR(json::parse("9223372036854775808"), "does not fit in 64 bits", "at byte 0");
  EXPECT_KILN_ERROR(json::parse("[1, -9223372036854775809]"), "does not fit in 64 bits", "at byte 4");
  EXPECT_KILN_ERROR(json::parse("1e400"), "out of range");
}

TEST(Json, RejectsMalformedNumbers) {
  EXPECT_KILN_ERROR(json::parse("01"), "leading zero");
  EXPECT_KILN_ERROR(json::parse("-"), "expected a digit");
  EXPECT_KILN_ERROR(json::parse("1."), "after the decimal point");
  EXPECT_KILN_ERROR(json::parse("1e"), "in the exponent");
  EXPECT_KILN_ERROR(json::parse("+1"), "expected a value");
  EXPECT_KILN_ERROR(json::parse(".5"), "expected a value");
}

TEST(Json, DecodesEscapesAndSurrogatePairs) {
  const Value v = json::parse(R"("q\" b\\ s\/ \b\f\n\r\t \u00e9 \u20AC \ud83d\ude00 \u0000")");
  const std::string expected = std::string("q\" b\\ s/ \b\f\n\r\t \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 ") +
                               std::string(1, '\0');
  EXPECT_EQ(v.as_string(), expected);
  EXPECT_KILN_ERROR(json::parse(R"("\ud83d")"), "high surrogate not followed by a low surrogate");
  EXPECT_KILN_ERROR(json::parse(R"("\ud83d\u0041")"), "high surrogate not followed by a low surrogate");
  EXPECT_KILN_ERROR(json::parse(R"("\ude00")"), "lone low surrogate");
  EXPECT_KILN_ERROR(json::parse(R"("\u12G4")"), "4 hex digits");
  EXPECT_KILN_ERROR(json::parse(R"("\x")"), "invalid escape");
}

TEST(Json, ValidatesUtf8InStrings) {
  EXPECT_EQ(json::parse("\"\xE2\x82\xAC\xF0\x9F\x98\x80\"").as_string(), "\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_KILN_ERROR(json::parse("\"\xFF\""), "invalid UTF-8 byte \\xff", "at byte 1");
  EXPECT_KILN_ERROR(json::parse("\"\x80\""), "invalid UTF-8 byte");
  EXPECT_KILN_ERROR(json::parse("\"\xC0\xAF\""), "invalid UTF-8 byte");         // overlong '/'
  EXPECT_KILN_ERROR(json::parse("\"\xE0\x80\xAF\""), "invalid UTF-8 sequence");  // overlong
  EXPECT_KILN_ERROR(json::parse("\"\xED\xA0\x80\""), "invalid UTF-8 sequence");  // surrogate
  EXPECT_KILN_ERROR(json::parse("\"\xF4\x90\x80\x80\""), "invalid UTF-8 sequence");  // > U+10FFFF
  EXPECT_KILN_ERROR(json::parse("\"\xE2\x82\""), "invalid UTF-8 sequence");
  EXPECT_KILN_ERROR(json::parse("\"\xE2\x82"), "truncated UTF-8");
  EXPECT_KILN_ERROR(json::parse("\"a\tb\""), "control character", "at byte 2");
}

TEST(Json, StructuralErrorsNameTheByteOffset) {
  EXPECT_KILN_ERROR(json::parse(""), "unexpected end of text", "at byte 0");
  EXPECT_KILN_ERROR(json::parse("{\"a\" 1}"), "expected ':'", "at byte 5");
  EXPECT_KILN_ERROR(json::parse("{\"a\":1,}"), "expected a string key", "at byte 7");
  EXPECT_KILN_ERROR(json::parse("[1 2]"), "expected ',' or ']'", "at byte 3");
  EXPECT_KILN_ERROR(json::parse("{\"a\":1"), "unexpected end of text");
  EXPECT_KILN_ERROR(json::parse("\"abc"), "unterminated string");
  EXPECT_KILN_ERROR(json::parse("{} x"), "after the value", "at byte 3");
  EXPECT_KILN_ERROR(json::parse("tru"), "invalid literal");
  EXPECT_KILN_ERROR(json::parse("{\"k\":1,\"k\":2}"), "duplicate key \"k\"", "at byte 7");
}

TEST(Json, DepthAndSizeAreBounded) {
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  EXPECT_KILN_ERROR(json::parse(deep), "nesting deeper than 64 levels");
  const std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_NO_THROW(json::parse(ok));
  // Far deeper than any stack could recurse: still a clean error.
  EXPECT_KILN_ERROR(json::parse(std::string(1'000'000, '[')), "nesting deeper");
  EXPECT_KILN_ERROR(json::parse("[1, 2, 3]", {.max_bytes = 4}), "exceeds the limit of 4 bytes");
}

TEST(Json, AccessorsCheckTheType) {
  EXPECT_KILN_ERROR(json::parse("\"s\"").as_integer(), "expected an integer, got a string");
  EXPECT_KILN_ERROR(json::parse("1.5").as_integer(), "expected an integer, got a number");
  EXPECT_KILN_ERROR(json::parse("[]").find("k"), "expected an object, got an array");
}

// A Value once held a bool, an int64, a double, a string and two vectors side by side
// (over 100 bytes per JSON value); it holds one of them now.
TEST(Json, ValueHoldsOneKindAtATime) {
  EXPECT_LE(sizeof(Value), sizeof(std::string) + sizeof(void*));
  const Value original = json::parse(R"({"a":[1,"two",{"b":null}],"c":2.5})");
  Value copy = original;  // deep
  copy.add("d", Value::boolean(false));
  EXPECT_EQ(original.as_object().size(), 2u);
  EXPECT_EQ(json::dump(copy), R"({"a":[1,"two",{"b":null}],"c":2.5,"d":false})");
  Value moved = std::move(copy);
  EXPECT_EQ(moved.find("a")->as_array()[1].as_string(), "two");
  EXPECT_TRUE(Value().is(Type::Null));
}

TEST(Json, ParseErrorsAreTheReadersErrors) {
  EXPECT_THROW(json::parse("[1,,2]"), json::ParseError);
  EXPECT_THROW(json::parse(std::string(100, '['), {.max_depth = 8}), json::ParseError);
  // A well-formed value of the wrong type is the caller's complaint, not a ParseError.
  try {
    json::parse("1").as_string();
    ADD_FAILURE() << "no error";
  } catch (const json::ParseError&) {
    ADD_FAILURE() << "an accessor's error is not a problem with the text";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "json: expected a string, got an integer");
  }
}

TEST(Json, DumpIsCompactWithSerdeEscapes) {
  Value v = Value::object();
  v.add("name \"q\" \\ /", Value::string(std::string("\b\f\n\r\t\x01\x1f\x7f \xC3\xA9")));
  v.add("list", Value::array({Value::integer(-3), Value::boolean(true), Value(), Value::number(0.5)}));
  EXPECT_EQ(json::dump(v),
            "{\"name \\\"q\\\" \\\\ /\":\"\\b\\f\\n\\r\\t\\u0001\\u001f\x7f \xC3\xA9\","
            "\"list\":[-3,true,null,0.5]}");
  EXPECT_KILN_ERROR(json::dump(Value::number(std::numeric_limits<double>::infinity())), "non-finite");
}

TEST(Json, IndentedDumpPutsEachItemOnItsLine) {
  Value v = Value::object();
  v.add("a", Value::array({Value::integer(1), Value::object()}));
  v.add("b", Value::array());
  v.add("c", Value::object({{"d", Value::string("e")}}));
  EXPECT_EQ(json::dump(v, 2),
            "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": [],\n  \"c\": {\n    \"d\": \"e\"\n  }\n}");
  EXPECT_EQ(json::dump(json::parse(json::dump(v, 4))), json::dump(v));
  EXPECT_EQ(json::dump(Value::integer(3), 2), "3");
}

// Doubles round-trip exactly and stay numbers: an integral double once came out without
// a "." or exponent, and 2^63 was then refused as an int64 overflow (an optimizer state with
// such an option could not be reloaded).
TEST(Json, DoublesRoundTripExactlyAndStayNumbers) {
  const double values[] = {9223372036854775808.0, -9223372036854775808.0, 1e19, 1.7976931348623157e308, -1.7976931348623157e308, 1e5,
                           0.0, -0.0, 5e-324, 0.1, 1.0 / 3.0, 4503599627370497.0, 123456789012345680.0};
  for (const double v : values) {
    const std::string text = json::dump(Value::number(v));
    const Value back = json::parse(text);
    ASSERT_EQ(back.type(), json::Type::Number) << text;
    EXPECT_EQ(back.as_number(), v) << text;
    EXPECT_EQ(std::signbit(back.as_number()), std::signbit(v)) << text;
  }
  EXPECT_EQ(json::dump(Value::number(123456.0)), "123456.0");
  EXPECT_EQ(json::dump(Value::number(-0.0)), "-0.0");
  EXPECT_EQ(json::dump(Value::number(0.5)), "0.5");
  EXPECT_EQ(json::dump(Value::number(1e300)), "1e+300");
}

TEST(Json, DumpRefusesStringsTheParserWouldRefuse) {
  EXPECT_KILN_ERROR(json::dump(Value::string("a\xFF")), "json: cannot write the string \"a\\xff\"",
                    "invalid UTF-8 byte \\xff in a string at byte 1");
  Value object = Value::object();
  object.add("\xE0\x80\x80", Value());  // overlong NUL as a key
  EXPECT_KILN_ERROR(json::dump(object), "invalid UTF-8 sequence");
  EXPECT_EQ(json::dump(Value::string("\xC3\xA9\xF0\x9F\x98\x80")), "\"\xC3\xA9\xF0\x9F\x98\x80\"");
}

TEST(Json, FindInvalidUtf8AgreesWithTheParser) {
  const std::string cases[] = {"plain", "\xC3\xA9", "\xFF", "a\xC3", "\xC0\x80", "\xED\xA0\x80",
                               "\xF4\x90\x80\x80", "\xE2\x82", "\xE2\x28\xA1", "ok\xF0\x9F\x98\x80ok"};
  for (const std::string& text : cases) {
    const std::optional<json::Utf8Problem> problem = json::find_invalid_utf8(text);
    bool parses = true;
    try {
      json::parse("\"" + text + "\"");
    } catch (const Error&) {
      parses = false;
    }
    EXPECT_EQ(!problem.has_value(), parses) << json::printable(text);
  }
  EXPECT_EQ(json::find_invalid_utf8("ab\xC3\xA9\x80")->offset, 4u);
  EXPECT_EQ(json::find_invalid_utf8("ab\xC3\xA9\x80")->what, "invalid UTF-8 byte \\x80");
}

TEST(Json, DumpThenParseRoundTrips) {
  const std::string text =
      "{\"a\":[1,-9223372036854775808,{\"b\":\"\\u0000\\n\xF0\x9F\x98\x80\"}],\"c\":null,\"d\":false}";
  EXPECT_EQ(json::dump(json::parse(text)), text);
}

}  // namespace
}  // namespace kiln
