// JSON values and text: json::Value, a tree of one JSON value (the optimizer and scheduler
// states are built and read as trees); parse(), which builds one from text; dump(), which
// writes one as text.
//
// parse() is a json::Reader (core/json_reader.h, the one reader: full RFC 8259 grammar,
// exact int64 integers, escapes and surrogate pairs decoded to UTF-8, UTF-8 checked,
// repeated keys refused, depth and size bounded, every error naming its byte offset)
// whose every value is kept. Objects keep their members in file order.
//
// A Value is a std::variant of the seven JSON kinds, the size of a std::string and an
// index (40 bytes with libstdc++): it once held every kind side by side, over 100 bytes.
//
// dump() writes compact JSON (no spaces) with the escapes serde_json uses (\" \\ \b \f
// \n \r \t, other control characters as \u00xx, everything else raw UTF-8), so a
// safetensors header we write is byte for byte the one Python's safetensors writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/json_reader.h"

namespace kiln::json {

// One JSON value, of one of the seven types.
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

  Type type() const { return static_cast<Type>(data_.index()); }
  bool is(Type type) const { return this->type() == type; }

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

  // The alternatives in the order of Type, so that index() is the type.
  using Data = std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<Value>,
                            std::vector<Member>>;
  template <Type type, typename T>
  static constexpr bool kHoldsAt = std::is_same_v<std::variant_alternative_t<size_t(type), Data>, T>;
  static_assert(std::variant_size_v<Data> == 7 && kHoldsAt<Type::Null, std::monostate> &&
                kHoldsAt<Type::Bool, bool> && kHoldsAt<Type::Integer, int64_t> && kHoldsAt<Type::Number, double> &&
                kHoldsAt<Type::String, std::string> && kHoldsAt<Type::Array, std::vector<Value>> &&
                kHoldsAt<Type::Object, std::vector<Member>>);

  Data data_;
};

// Parses exactly one JSON value; whitespace may surround it, anything else after it is
// an error (a ParseError, as every problem with the text).
Value parse(std::string_view text, ParseLimits limits = {});

// The JSON text of a file; an unreadable file or bad text is an error naming the path.
Value parse_file(const std::string& path, ParseLimits limits = {});

// Serialization (see the file comment): compact, or with indent > 0 one item per line
// indented by `indent` spaces per level (for files people read: configurations, run
// summaries). Non-finite numbers and strings that are not valid UTF-8 (find_invalid_utf8)
// are an error.
std::string dump(const Value& value, int indent = 0);
// Appends `text` as a quoted, escaped JSON string.
void append_quoted(std::string& out, std::string_view text);

}  // namespace kiln::json
