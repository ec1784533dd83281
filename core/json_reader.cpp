// The pull reader of core/json_reader.h: recursive descent turned inside out. The caller
// makes the descent (it calls begin_object, next_key, read_integer, ... in the order of
// the value it expects); the reader keeps the grammar's state between calls (whether a
// value is due, and a stack of the open containers with their keys) and checks every byte
// it passes, so no caller can accept malformed text. One byte offset serves the messages.
#include "core/json_reader.h"

#include <charconv>
#include <cmath>
#include <system_error>

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

// "an integer", "a string": type names with their article, for messages.
std::string with_article(Type type) {
  const std::string_view name = type_name(type);
  const bool vowel = name[0] == 'a' || name[0] == 'i' || name[0] == 'o';
  return std::string(vowel ? "an " : "a ") + std::string(name);
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_whitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
// A string byte that stands for itself: printable ASCII other than the quote and backslash.
bool is_plain(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte >= 0x20 && byte < 0x80 && c != '"' && c != '\\';
}
std::string printable_char(char c) { return printable(std::string_view(&c, 1)); }

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

void append_utf8(std::string& out, uint32_t cp) {
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

std::string unit_hex(uint32_t unit) {
  static const char* kHex = "0123456789ABCDEF";
  return {kHex[(unit >> 12) & 15], kHex[(unit >> 8) & 15], kHex[(unit >> 4) & 15], kHex[unit & 15]};
}

}  // namespace

// ---- the grammar's state ----------------------------------------------------------------

Reader::Reader(std::string_view text, ParseLimits limits) : text_(text), limits_(limits) {
  if (text_.size() > limits_.max_bytes) {
    throw ParseError(detail::str_cat("json: text of ", text_.size(), " bytes exceeds the limit of ",
                                     limits_.max_bytes, " bytes"));
  }
}

template <typename... Parts>
void Reader::fail(const Parts&... parts) const {
  throw ParseError(detail::str_cat("json: ", parts..., " at byte ", pos_));
}

void Reader::skip_whitespace() {
  while (!at_end() && is_whitespace(text_[pos_])) ++pos_;
}

void Reader::expect_char(char c, const char* what) {
  if (at_end()) fail("unexpected end of text, expected ", what);
  if (text_[pos_] != c) fail("expected ", what, ", found '", printable_char(text_[pos_]), "'");
  ++pos_;
}

Type Reader::peek() {
  KILN_ASSERT(value_due_, "json::Reader: a value was asked for where none comes next");
  skip_whitespace();
  if (at_end()) fail("unexpected end of text, expected a value");
  switch (text_[pos_]) {
    case '{': return Type::Object;
    case '[': return Type::Array;
    case '"': return Type::String;
    case 't': case 'f': return Type::Bool;
    case 'n': return Type::Null;
    default: break;
  }
  if (text_[pos_] == '-' || is_digit(text_[pos_])) return number_type();
  fail("unexpected '", printable_char(text_[pos_]), "', expected a value");
}

// A number is an Integer when its digits are followed by neither a fraction nor an
// exponent. Only a look: read_integer/read_number check the whole token.
Type Reader::number_type() const {
  size_t end = pos_ + (text_[pos_] == '-' ? 1 : 0);
  while (end < text_.size() && is_digit(text_[end])) ++end;
  const char next = end < text_.size() ? text_[end] : '\0';
  return next == '.' || next == 'e' || next == 'E' ? Type::Number : Type::Integer;
}

void Reader::start_value(Type type) {
  const Type found = peek();
  if (found != type) fail("expected ", with_article(type), ", found ", with_article(found));
}

void Reader::enter(bool is_object) {
  if (open_.size() >= static_cast<size_t>(limits_.max_depth)) {
    fail("nesting deeper than ", limits_.max_depth, " levels");
  }
  ++pos_;  // '{' or '['
  open_.push_back({.is_object = is_object});
  value_due_ = false;
}

// Before an entry of the innermost container: true, past the ',' that separates it from
// the previous one, when an entry follows; false, past `close`, when the container ends
// (the caller's entry read reports anything else).
bool Reader::next_entry(char close, const char* separator_or_close) {
  Container& container = open_.back();
  skip_whitespace();
  if (container.has_entries ? current() == ',' : current() != close) {
    if (container.has_entries) ++pos_;
    container.has_entries = true;
    return true;
  }
  expect_char(close, separator_or_close);
  open_.pop_back();
  return false;
}

// ---- containers -------------------------------------------------------------------------

void Reader::begin_object() {
  start_value(Type::Object);
  enter(/*is_object=*/true);
}

std::optional<std::string> Reader::next_key() {
  KILN_ASSERT(!value_due_ && !open_.empty() && open_.back().is_object,
              "json::Reader: next_key() outside an object, or before the last member's value was read");
  if (!next_entry('}', "',' or '}' in an object")) return std::nullopt;
  skip_whitespace();
  if (current() != '"') fail(at_end() ? "unexpected end of text, expected" : "expected", " a string key");
  const size_t key_start = pos_;
  std::string key = read_string_token();
  if (!open_.back().keys.insert(key).second) {
    pos_ = key_start;
    fail("duplicate key \"", key, "\"");
  }
  skip_whitespace();
  expect_char(':', "':' after an object key");
  value_due_ = true;
  return key;
}

void Reader::begin_array() {
  start_value(Type::Array);
  enter(/*is_object=*/false);
}

bool Reader::next_item() {
  KILN_ASSERT(!value_due_ && !open_.empty() && !open_.back().is_object,
              "json::Reader: next_item() outside an array, or before the last item was read");
  if (!next_entry(']', "',' or ']' in an array")) return false;
  value_due_ = true;
  return true;
}

// Iterative, with the reader's own calls: the open-container stack is the only stack, so
// skipping is bounded by max_depth like reading.
void Reader::skip_value() {
  KILN_ASSERT(value_due_, "json::Reader: skip_value() where no value comes next");
  const size_t depth = open_.size();
  do {
    if (!value_due_) {  // between entries of a container entered below
      if (open_.back().is_object) next_key();
      else next_item();
      continue;
    }
    switch (peek()) {
      case Type::Null: read_null(); break;
      case Type::Bool: read_bool(); break;
      case Type::Integer: read_integer(); break;
      case Type::Number: read_number(); break;
      case Type::String: read_string(); break;
      case Type::Array: begin_array(); break;
      case Type::Object: begin_object(); break;
    }
  } while (open_.size() > depth);
}

void Reader::finish() {
  KILN_ASSERT(!value_due_ && open_.empty(), "json::Reader: finish() before the value was read");
  skip_whitespace();
  if (!at_end()) fail("unexpected '", printable_char(text_[pos_]), "' after the value");
}

// ---- scalars ----------------------------------------------------------------------------

void Reader::read_null() {
  start_value(Type::Null);
  read_literal("null");
}

bool Reader::read_bool() {
  start_value(Type::Bool);
  const bool value = text_[pos_] == 't';
  read_literal(value ? "true" : "false");
  return value;
}

void Reader::read_literal(std::string_view word) {
  if (text_.substr(pos_, word.size()) != word) fail("invalid literal, expected '", word, "'");
  pos_ += word.size();
  value_due_ = false;
}

int64_t Reader::read_integer() {
  start_value(Type::Integer);
  const size_t start = pos_;
  const std::string_view token = scan_number();
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
  value_due_ = false;
  return value;
}

double Reader::read_number() {
  if (peek() == Type::Integer) return static_cast<double>(read_integer());
  start_value(Type::Number);
  const size_t start = pos_;
  const std::string_view token = scan_number();
  double value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc() || end != token.data() + token.size() || !std::isfinite(value)) {
    pos_ = start;
    fail("number ", token, " is out of range");
  }
  value_due_ = false;
  return value;
}

// The token of -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at pos_, which it passes.
std::string_view Reader::scan_number() {
  const size_t start = pos_;
  const auto skip_digits = [this] {
    const size_t first = pos_;
    while (is_digit(current())) ++pos_;
    return pos_ - first;
  };
  if (current() == '-') ++pos_;
  if (current() == '0') {
    ++pos_;
    if (is_digit(current())) fail("leading zero in a number");
  } else if (skip_digits() == 0) {
    fail("expected a digit");
  }
  if (current() == '.') {
    ++pos_;
    if (skip_digits() == 0) fail("expected a digit after the decimal point");
  }
  if (current() == 'e' || current() == 'E') {
    ++pos_;
    if (current() == '+' || current() == '-') ++pos_;
    if (skip_digits() == 0) fail("expected a digit in the exponent");
  }
  return text_.substr(start, pos_ - start);
}

// ---- strings ----------------------------------------------------------------------------

std::string Reader::read_string() {
  start_value(Type::String);
  std::string value = read_string_token();
  value_due_ = false;
  return value;
}

// The string whose opening quote is at pos_, decoded; passes its closing quote.
std::string Reader::read_string_token() {
  ++pos_;  // opening quote
  std::string out;
  while (true) {
    const size_t run = pos_;  // plain bytes are copied a run at a time
    while (!at_end() && is_plain(text_[pos_])) ++pos_;
    out.append(text_, run, pos_ - run);
    if (at_end()) fail("unterminated string");
    const auto byte = static_cast<unsigned char>(text_[pos_]);
    if (byte == '"') {
      ++pos_;
      return out;
    }
    if (byte == '\\') {
      read_escape(out);
    } else if (byte < 0x20) {
      fail("control character ", printable_char(text_[pos_]), " in a string (must be escaped)");
    } else {
      copy_utf8_sequence(out);
    }
  }
}

void Reader::read_escape(std::string& out) {
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
    case 'u': append_utf8(out, read_unicode_escape()); return;
    default: --pos_; fail("invalid escape '\\", printable_char(c), "'");
  }
}

uint32_t Reader::read_hex4() {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = current();
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
uint32_t Reader::read_unicode_escape() {
  const uint32_t unit = read_hex4();
  if (unit >= 0xDC00 && unit <= 0xDFFF) fail("lone low surrogate \\u", unit_hex(unit));
  if (unit < 0xD800 || unit > 0xDBFF) return unit;
  if (text_.substr(pos_, 2) != "\\u") fail("high surrogate not followed by a low surrogate");
  pos_ += 2;
  const uint32_t low = read_hex4();
  if (low < 0xDC00 || low > 0xDFFF) fail("high surrogate not followed by a low surrogate");
  return 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
}

// Copies one multi-byte UTF-8 sequence, rejecting stray continuation bytes, truncated
// sequences, overlong forms, encoded surrogates and code points above U+10FFFF.
void Reader::copy_utf8_sequence(std::string& out) {
  const Utf8Sequence sequence = utf8_sequence_at(text_, pos_);
  if (!sequence.problem.empty()) fail(sequence.problem, " in a string");
  out.append(text_.substr(pos_, sequence.length));
  pos_ += sequence.length;
}

// ---- UTF-8 and messages -----------------------------------------------------------------

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

}  // namespace kiln::json
