// The one JSON reader: a pull parser (a cursor) over RFC 8259 text. The caller asks for
// what comes next (peek() its type, read a scalar, enter an object or an array and step
// through its members), so it keeps only what it wants: json::parse() (core/json.h)
// builds a Value tree on top of it, and the safetensors header reader builds its
// TensorInfo entries directly, checking each as it goes.
//
// The reader keeps every guarantee of the JSON grammar whatever its caller asks: the full
// grammar; integers without fraction or exponent exact as int64 (one that does not fit is
// an error, never a silent rounding), other numbers doubles; every string escape, with
// \uXXXX and UTF-16 surrogate pairs decoded to UTF-8; strings valid UTF-8; a repeated key
// in an object an error; nesting depth and text size bounded (ParseLimits). Every problem
// with the text is a json::ParseError (a kiln::Error) naming it and its byte offset.
//
// Memory: a stack of the open containers (at most max_depth) and, per open object, the
// set of its keys seen so far (for the duplicate check); nothing else outlives a call. A
// caller that keeps only what it needs reads any text in memory proportional to what it
// keeps plus the keys of the objects open at once, never a tree of the whole text.
//
// Usage (an object of arrays of integers):
//   json::Reader reader(text);
//   reader.begin_object();
//   while (std::optional<std::string> key = reader.next_key()) {
//     if (reader.peek() != json::Type::Array) { reader.skip_value(); continue; }
//     reader.begin_array();
//     while (reader.next_item()) use(*key, reader.read_integer());
//   }
//   reader.finish();
// Calls out of turn (a key asked for where a value comes next, say) are a Kiln bug and
// fail a KILN_ASSERT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/error.h"

namespace kiln::json {

enum class Type { Null, Bool, Integer, Number, String, Array, Object };
std::string_view type_name(Type type);  // "null", "integer", "object", ...
std::string with_article(Type type);    // "an integer", "a string", ...

struct ParseLimits {
  size_t max_bytes = 100'000'000;  // safetensors' own header limit
  int max_depth = 64;              // nested arrays/objects
};

// A problem with the text ("json: duplicate key \"k\" at byte 7"), as opposed to a
// caller's own complaint about well-formed JSON: callers that wrap the reader's errors in
// their own words (the safetensors reader) catch this type.
class ParseError : public Error {
 public:
  using Error::Error;
};

class Reader {
 public:
  // Throws ParseError when `text` is longer than limits.max_bytes. `text` must outlive
  // the reader.
  explicit Reader(std::string_view text, ParseLimits limits = {});

  // The type of the next value, without reading it. Integer when the number has no
  // fraction and no exponent.
  Type peek();

  // Each reads the next value, which must be of its type: anything else is a ParseError
  // ("expected an integer, found a string").
  void read_null();
  bool read_bool();
  int64_t read_integer();
  double read_number();  // an Integer too, converted (as Value::as_number)
  std::string read_string();

  // Objects: begin_object() enters one; then each next_key() returns the next member's
  // key, whose value the caller reads next, or, at the closing '}', leaves the object and
  // returns nullopt.
  void begin_object();
  std::optional<std::string> next_key();

  // Arrays: begin_array() enters one; then each next_item() returns true when an item
  // follows (the caller reads it next), or, at the closing ']', leaves the array and
  // returns false.
  void begin_array();
  bool next_item();

  // Reads the next value and drops it, checking it as thoroughly as reading it would.
  void skip_value();

  // After the top-level value: only whitespace may remain.
  void finish();

 private:
  // An open array or object.
  struct Container {
    bool is_object = false;
    bool has_entries = false;                   // ',' comes before the next one
    std::unordered_set<std::string> keys = {};  // objects: keys so far (duplicate check)
  };

  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) const;

  bool at_end() const { return pos_ >= text_.size(); }
  char current() const { return at_end() ? '\0' : text_[pos_]; }
  void skip_whitespace();
  void expect_char(char c, const char* what);
  Type number_type() const;
  void start_value(Type type);
  void enter(bool is_object);
  bool next_entry(char close, const char* separator_or_close);

  void read_literal(std::string_view word);
  std::string_view scan_number();
  std::string read_string_token();
  void read_escape(std::string& out);
  uint32_t read_hex4();
  uint32_t read_unicode_escape();
  void copy_utf8_sequence(std::string& out);

  std::string_view text_;
  ParseLimits limits_;
  size_t pos_ = 0;
  bool value_due_ = true;  // a value comes next (at the start, after a key or an item)
  std::vector<Container> open_;
};

// Where `text` first breaks the UTF-8 rules the reader applies to strings (no stray
// continuation bytes, truncated sequences, overlong forms, encoded surrogates or code
// points above U+10FFFF): the byte offset and the reader's words for it ("invalid UTF-8
// byte \xff", "truncated UTF-8 sequence", "invalid UTF-8 sequence"); nullopt when valid.
// Writers check with it, so a file is never written that its reader would refuse.
struct Utf8Problem {
  size_t offset;
  std::string what;
};
std::optional<Utf8Problem> find_invalid_utf8(std::string_view text);

// `text` with every byte outside printable ASCII as \xNN: safe to put in a message.
std::string printable(std::string_view text);

}  // namespace kiln::json
