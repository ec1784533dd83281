// The JSON reader and writer of core/json.h: a recursive-descent parser over the text
// with one byte offset for error messages, and a writer with serde_json's escapes.
#include "core/json.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>
#include <unordered_set>

#include "core/error.h"

namespace kiln::json {

std::string_view type_name(Type type) {
  switch (type) {
    case Type::Null: return "null";
    case Type::Bool: return "boolean";
    case Type::Integer: return "integer";
    case Type::Number: return "number";
    case Type::String: return "string";
    case Type::Array: return "array";
    case Type::Object: return "object";
  }
  return "?";
}

// ---- Value ------------------------------------------------------------------------------

Value Value::boolean(bool value) {
  Value v;
  v.type_ = Type::Bool;
  v.bool_ = value;
  return v;
}
Value Value::integer(int64_t value) {
  Value v;
  v.type_ = Type::Integer;
  v.integer_ = value;
  return v;
}
Value Value::number(double value) {
  Value v;
  v.type_ = Type::Number;
  v.number_ = value;
  return v;
}
Value Value::string(std::string value) {
  Value v;
  v.type_ = Type::String;
  v.string_ = std::move(value);
  return v;
}
Value Value::array(std::vector<Value> items) {
  Value v;
  v.type_ = Type::Array;
  v.array_ = std::move(items);
  return v;
}
Value Value::object(std::vector<Member> members) {
  Value v;
  v.type_ = Type::Object;
  v.object_ = std::move(members);
  return v;
}

// "an integer", "a string": type names with their article, for messages.
std::string with_article(Type type) {
  const std::string_view name = type_name(type);
  const bool vowel = name[0] == 'a' || name[0] == 'i' || name[0] == 'o';
  return std::string(vowel ? "an " : "a ") + std::string(name);
}

void Value::expect(Type type) const {
  KILN_CHECK(type_ == type, "json: expected ", with_article(type), ", got ", with_article(type_));
}

bool Value::as_bool() const { expect(Type::Bool); return bool_; }
int64_t Value::as_integer() const { expect(Type::Integer); return integer_; }
double Value::as_number() const {
  if (type_ == Type::Integer) return static_cast<double>(integer_);
  expect(Type::Number);
  return number_;
}
const std::string& Value::as_string() const { expect(Type::String); return string_; }
const std::vector<Value>& Value::as_array() const { expect(Type::Array); return array_; }
const std::vector<Value::Member>& Value::as_object() const { expect(Type::Object); return object_; }

const Value* Value::find(std::string_view key) const {
  for (const Member& member : as_object()) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}
void Value::push_back(Value item) { expect(Type::Array); array_.push_back(std::move(item)); }
void Value::add(std::string key, Value value) {
  expect(Type::Object);
  object_.emplace_back(std::move(key), std::move(value));
}

// ---- parser -----------------------------------------------------------------------------

namespace {

// One multi-byte UTF-8 sequence starting at text[pos] (a byte >= 0x80): its length, or
// the problem with it in the words of find_invalid_utf8.
struct Utf8Sequence {
  size_t length = 0;
  std::string problem;
};

Utf8Sequence utf8_sequence_at(std::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  size_t length = 0;
  uint32_t cp = 0;
  if (lead >= 0xC2 && lead <= 0xDF) { length = 2; cp = lead & 0x1F; }
  else if (lead >= 0xE0 && lead <= 0xEF) { length = 3; cp = lead & 0x0F; }
  else if (lead >= 0xF0 && lead <= 0xF4) { length = 4; cp = lead & 0x07; }
  else return {0, "invalid UTF-8 byte " + printable(text.substr(pos, 1))};
  if (pos + length > text.size()) return {0, "truncated UTF-8 sequence"};
  for (size_t i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(text[pos + i]);
    if ((next & 0xC0) != 0x80) return {0, "invalid UTF-8 sequence"};
    cp = (cp << 6) | (next & 0x3F);
  }
  const bool overlong = (length == 3 && cp < 0x800) || (length == 4 && cp < 0x10000);
  if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return {0, "invalid UTF-8 sequence"};
  return {length, ""};
}

class Parser {
 public:
  Parser(std::string_view text, ParseLimits limits) : text_(text), limits_(limits) {}

  Value parse_document() {
    KILN_CHECK(text_.size() <= limits_.max_bytes, "json: text of ", text_.size(),
               " bytes exceeds the limit of ", limits_.max_bytes, " bytes");
    skip_whitespace();
    Value value = parse_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("unexpected '", printable(text_[pos_]), "' after the value");
    return value;
  }

 private:
  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    detail::throw_user_error(detail::str_cat("json: ", parts..., " at byte ", pos_));
  }
  static std::string printable(char c) { return json::printable(std::string_view(&c, 1)); }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                         text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  void expect_char(char c, const char* what) {
    if (at_end()) fail("unexpected end of text, expected ", what);
    if (text_[pos_] != c) fail("expected ", what, ", found '", printable(text_[pos_]), "'");
    ++pos_;
  }

  Value parse_value(int depth) {
    if (at_end()) fail("unexpected end of text, expected a value");
    switch (text_[pos_]) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Value::string(parse_string());
      case 't': parse_literal("true"); return Value::boolean(true);
      case 'f': parse_literal("false"); return Value::boolean(false);
      case 'n': parse_literal("null"); return Value();
      default: break;
    }
    if (text_[pos_] == '-' || (text_[pos_] >= '0' && text_[pos_] <= '9')) return parse_number();
    fail("unexpected '", printable(text_[pos_]), "', expected a value");
  }

  void parse_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail("invalid literal, expected '", word, "'");
    pos_ += word.size();
  }

  void check_depth(int depth) const {
    if (depth > limits_.max_depth) fail("nesting deeper than ", limits_.max_depth, " levels");
  }

  Value parse_object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    Value object = Value::object();
    std::unordered_set<std::string> keys;  // duplicate detection in O(1) per key
    skip_whitespace();
    if (peek() == '}') { ++pos_; return object; }
    while (true) {
      skip_whitespace();
      if (peek() != '"') fail(at_end() ? "unexpected end of text, expected" : "expected",
                              " a string key");
      const size_t key_start = pos_;
      std::string key = parse_string();
      if (!keys.insert(key).second) {
        pos_ = key_start;
        fail("duplicate key \"", key, "\"");
      }
      skip_whitespace();
      expect_char(':', "':' after an object key");
      skip_whitespace();
      Value value = parse_value(depth);
      object.add(std::move(key), std::move(value));
      skip_whitespace();
      if (peek() == ',') { ++pos_; continue; }
      expect_char('}', "',' or '}' in an object");
      return object;
    }
  }

  Value parse_array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    Value array = Value::array();
    skip_whitespace();
    if (peek() == ']') { ++pos_; return array; }
    while (true) {
      skip_whitespace();
      array.push_back(parse_value(depth));
      skip_whitespace();
      if (peek() == ',') { ++pos_; continue; }
      expect_char(']', "',' or ']' in an array");
      return array;
    }
  }

  // ---- numbers: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? --------------------------

  size_t skip_digits() {
    const size_t start = pos_;
    while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    return pos_ - start;
  }

  Value parse_number() {
    const size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
      if (peek() >= '0' && peek() <= '9') fail("leading zero in a number");
    } else if (skip_digits() == 0) {
      fail("expected a digit");
    }
    bool integral = true;
    if (peek() == '.') {
      ++pos_;
      integral = false;
      if (skip_digits() == 0) fail("expected a digit after the decimal point");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      integral = false;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (skip_digits() == 0) fail("expected a digit in the exponent");
    }
    const std::string_view token = text_.substr(start, pos_ - start);
    return integral ? parse_integer_token(token, start) : parse_double_token(token, start);
  }

  Value parse_integer_token(std::string_view token, size_t start) {
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (ec == std::errc::result_out_of_range) {
      pos_ = start;
      fail("integer ", token, " does not fit in 64 bits");
    }
    if (ec != std::errc() || end != token.data() + token.size()) {
      pos_ = start;
      fail("invalid integer ", token);
    }
    return Value::integer(value);
  }

  Value parse_double_token(std::string_view token, size_t start) {
    double value = 0;
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (ec != std::errc() || end != token.data() + token.size() || !std::isfinite(value)) {
      pos_ = start;
      fail("number ", token, " is out of range");
    }
    return Value::number(value);
  }

  // ---- strings ---------------------------------------------------------------------------

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail("unterminated string");
      const auto byte = static_cast<unsigned char>(text_[pos_]);
      if (byte == '"') { ++pos_; return out; }
      if (byte == '\\') {
        parse_escape(out);
      } else if (byte < 0x20) {
        fail("control character ", printable(text_[pos_]), " in a string (must be escaped)");
      } else if (byte < 0x80) {
        out.push_back(text_[pos_++]);
      } else {
        copy_utf8_sequence(out);
      }
    }
  }

  void parse_escape(std::string& out) {
    ++pos_;  // backslash
    if (at_end()) fail("unterminated escape");
    const char c = text_[pos_++];
    switch (c) {
      case '"': out.push_back('"'); return;
      case '\\': out.push_back('\\'); return;
      case '/': out.push_back('/'); return;
      case 'b': out.push_back('\b'); return;
      case 'f': out.push_back('\f'); return;
      case 'n': out.push_back('\n'); return;
      case 'r': out.push_back('\r'); return;
      case 't': out.push_back('\t'); return;
      case 'u': append_utf8(out, parse_unicode_escape()); return;
      default: --pos_; fail("invalid escape '\\", printable(c), "'");
    }
  }

  uint32_t parse_hex4() {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = peek();
      uint32_t digit = 0;
      if (c >= '0' && c <= '9') digit = c - '0';
      else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      else fail("expected 4 hex digits after \\u");
      value = value * 16 + digit;
      ++pos_;
    }
    return value;
  }

  // After "\u": a BMP code point, or a high surrogate that must be followed by "\u" and a
  // low surrogate (the pair encodes one code point above U+FFFF).
  uint32_t parse_unicode_escape() {
    const uint32_t unit = parse_hex4();
    if (unit >= 0xDC00 && unit <= 0xDFFF) fail("lone low surrogate \\u", unit_hex(unit));
    if (unit < 0xD800 || unit > 0xDBFF) return unit;
    if (text_.substr(pos_, 2) != "\\u") fail("high surrogate not followed by a low surrogate");
    pos_ += 2;
    const uint32_t low = parse_hex4();
    if (low < 0xDC00 || low > 0xDFFF) fail("high surrogate not followed by a low surrogate");
    return 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
  }
  static std::string unit_hex(uint32_t unit) {
    static const char* kHex = "0123456789ABCDEF";
    return {kHex[(unit >> 12) & 15], kHex[(unit >> 8) & 15], kHex[(unit >> 4) & 15], kHex[unit & 15]};
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // Copies one multi-byte UTF-8 sequence, rejecting stray continuation bytes, truncated
  // sequences, overlong forms, encoded surrogates and code points above U+10FFFF.
  void copy_utf8_sequence(std::string& out) {
    const Utf8Sequence sequence = utf8_sequence_at(text_, pos_);
    if (!sequence.problem.empty()) fail(sequence.problem, " in a string");
    out.append(text_.substr(pos_, sequence.length));
    pos_ += sequence.length;
  }

  std::string_view text_;
  ParseLimits limits_;
  size_t pos_ = 0;
};

// ---- writer -----------------------------------------------------------------------------

// The shortest text that reads back as exactly `value` (std::to_chars), marked as a
// floating number: to_chars writes 2^63 as "9223372036854775808" and 123456.0 as "123456",
// which the reader would take for an integer (refused past int64, or read back as an
// Integer), so an integral-looking result gets ".0", as Python's json writes 123456.0.
void append_number(std::string& out, double value) {
  KILN_CHECK(std::isfinite(value), "json: cannot write the non-finite number ", value);
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  KILN_ASSERT(ec == std::errc(), "to_chars failed");
  const std::string_view text(buffer, static_cast<size_t>(end - buffer));
  out.append(text);
  if (text.find_first_of(".eE") == std::string_view::npos) out += ".0";
}

void append_value(std::string& out, const Value& value) {
  switch (value.type()) {
    case Type::Null: out += "null"; return;
    case Type::Bool: out += value.as_bool() ? "true" : "false"; return;
    case Type::Integer: out += std::to_string(value.as_integer()); return;
    case Type::Number: append_number(out, value.as_number()); return;
    case Type::String: append_quoted(out, value.as_string()); return;
    case Type::Array: {
      out.push_back('[');
      bool first = true;
      for (const Value& item : value.as_array()) {
        if (!first) out.push_back(',');
        first = false;
        append_value(out, item);
      }
      out.push_back(']');
      return;
    }
    case Type::Object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, member] : value.as_object()) {
        if (!first) out.push_back(',');
        first = false;
        append_quoted(out, key);
        out.push_back(':');
        append_value(out, member);
      }
      out.push_back('}');
      return;
    }
  }
}

}  // namespace

Value parse(std::string_view text, ParseLimits limits) {
  return Parser(text, limits).parse_document();
}

std::optional<Utf8Problem> find_invalid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    Utf8Sequence sequence = utf8_sequence_at(text, pos);
    if (!sequence.problem.empty()) return Utf8Problem{pos, std::move(sequence.problem)};
    pos += sequence.length;
  }
  return std::nullopt;
}

std::string printable(std::string_view text) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      out.push_back(c);
    } else {
      out += "\\x";
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 15]);
    }
  }
  return out;
}

void append_quoted(std::string& out, std::string_view text) {
  if (const std::optional<Utf8Problem> problem = find_invalid_utf8(text)) {
    KILN_CHECK(false, "json: cannot write the string \"", printable(text), "\": ", problem->what,
               " in a string at byte ", problem->offset);
  }
  static const char* kHex = "0123456789abcdef";
  out.push_back('"');
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (byte < 0x20) {
      out += "\\u00";
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 15]);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
}

std::string dump(const Value& value) {
  std::string out;
  append_value(out, value);
  return out;
}

}  // namespace kiln::json
