// A small JSON reader and writer, enough for safetensors headers (core/safetensors.h).
//
// parse() reads the full JSON grammar (RFC 8259): objects, arrays, strings with every
// escape (\uXXXX and UTF-16 surrogate pairs become UTF-8), numbers, true/false/null.
// Integers without fraction or exponent are kept exact as int64 (one that does not fit is
// an error, never a silent rounding); other numbers are doubles. Objects keep their
// members in file order and a repeated key is an error (safetensors names must be
// unique). Strings must be valid UTF-8. Every error is a kiln::Error naming the problem
// and its byte offset in the text; depth and size are bounded (ParseLimits) so hostile
// input cannot exhaust the stack or memory.
//
// dump() writes compact JSON (no spaces) with the escapes serde_json uses (\" \\ \b \f
// \n \r \t, other control characters as \u00xx, everything else raw UTF-8), so a
// safetensors header we write is byte for byte the one Python's safetensors writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::json {

enum class Type { Null, Bool, Integer, Number, String, Array, Object };
std::string_view type_name(Type type);  // "null", "integer", "object", ...
std::string with_article(Type type);    // "an integer", "a string", ...

// One JSON value. Only the member of its type is meaningful.
class Value {
 public:
  using Member = std::pair<std::string, Value>;

  Value() = default;  // null
  static Value boolean(bool value);
  static Value integer(int64_t value);
  static Value number(double value);
  static Value string(std::string value);
  static Value array(std::vector<Value> items = {});
  static Value object(std::vector<Member> members = {});

  Type type() const { return type_; }
  bool is(Type type) const { return type_ == type; }

  // Accessors check the type and throw kiln::Error ("json: expected a string, got an
  // integer") on a mismatch.
  bool as_bool() const;
  int64_t as_integer() const;
  double as_number() const;  // integers convert
  const std::string& as_string() const;
  const std::vector<Value>& as_array() const;
  const std::vector<Member>& as_object() const;

  // Object members: the value under `key`, or nullptr.
  const Value* find(std::string_view key) const;
  // Appends to an array / object (no duplicate check: the writer trusts its caller).
  void push_back(Value item);
  void add(std::string key, Value value);

 private:
  void expect(Type type) const;

  Type type_ = Type::Null;
  bool bool_ = false;
  int64_t integer_ = 0;
  double number_ = 0;
  std::string string_;
  std::vector<Value> array_;
  std::vector<Member> object_;
};

struct ParseLimits {
  size_t max_bytes = 100'000'000;  // safetensors' own header limit
  int max_depth = 64;              // nested arrays/objects
};

// Parses exactly one JSON value; whitespace may surround it, anything else after it is
// an error.
Value parse(std::string_view text, ParseLimits limits = {});

// Where `text` first breaks the UTF-8 rules the parser applies to strings (no stray
// continuation bytes, truncated sequences, overlong forms, encoded surrogates or code
// points above U+10FFFF): the byte offset and the parser's words for it ("invalid UTF-8
// byte \xff", "truncated UTF-8 sequence", "invalid UTF-8 sequence"); nullopt when valid.
// Writers check with it, so a file is never written that its reader would refuse.
struct Utf8Problem {
  size_t offset;
  std::string what;
};
std::optional<Utf8Problem> find_invalid_utf8(std::string_view text);

// `text` with every byte outside printable ASCII as \xNN: safe to put in a message.
std::string printable(std::string_view text);

// Compact serialization (see the file comment). Non-finite numbers and strings that are not
// valid UTF-8 (find_invalid_utf8) are an error.
std::string dump(const Value& value);
// Appends `text` as a quoted, escaped JSON string.
void append_quoted(std::string& out, std::string_view text);

}  // namespace kiln::json
