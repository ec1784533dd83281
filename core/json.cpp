// json::Value, parse() and dump() of core/json.h: the Value accessors over its variant,
// a tree builder that keeps every value a json::Reader reads, and a writer with
// serde_json's escapes.
#include "core/json.h"

#include <charconv>
#include <cmath>
#include <optional>
#include <system_error>

#include "core/error.h"
#include "core/text_file.h"

namespace kiln::json {

// ---- Value ------------------------------------------------------------------------------

Value Value::boolean(bool value) {
  Value v;
  v.data_.emplace<bool>(value);
  return v;
}
Value Value::integer(int64_t value) {
  Value v;
  v.data_.emplace<int64_t>(value);
  return v;
}
Value Value::number(double value) {
  Value v;
  v.data_.emplace<double>(value);
  return v;
}
Value Value::string(std::string value) {
  Value v;
  v.data_.emplace<std::string>(std::move(value));
  return v;
}
Value Value::array(std::vector<Value> items) {
  Value v;
  v.data_.emplace<std::vector<Value>>(std::move(items));
  return v;
}
Value Value::object(std::vector<Member> members) {
  Value v;
  v.data_.emplace<std::vector<Member>>(std::move(members));
  return v;
}

void Value::expect(Type type) const {
  KILN_CHECK(is(type), "json: expected ", with_article(type), ", got ", with_article(this->type()));
}

bool Value::as_bool() const { expect(Type::Bool); return std::get<bool>(data_); }
int64_t Value::as_integer() const { expect(Type::Integer); return std::get<int64_t>(data_); }
double Value::as_number() const {
  if (is(Type::Integer)) return static_cast<double>(std::get<int64_t>(data_));
  expect(Type::Number);
  return std::get<double>(data_);
}
const std::string& Value::as_string() const { expect(Type::String); return std::get<std::string>(data_); }
const std::vector<Value>& Value::as_array() const {
  expect(Type::Array);
  return std::get<std::vector<Value>>(data_);
}
const std::vector<Value::Member>& Value::as_object() const {
  expect(Type::Object);
  return std::get<std::vector<Member>>(data_);
}

const Value* Value::find(std::string_view key) const {
  for (const Member& member : as_object()) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}
void Value::push_back(Value item) {
  expect(Type::Array);
  std::get<std::vector<Value>>(data_).push_back(std::move(item));
}
void Value::add(std::string key, Value value) {
  expect(Type::Object);
  std::get<std::vector<Member>>(data_).emplace_back(std::move(key), std::move(value));
}

// ---- parse: a tree of everything the reader reads ---------------------------------------

namespace {

// Recursion is bounded: the reader refuses to open more than max_depth containers.
Value read_value(Reader& reader) {
  switch (reader.peek()) {
    case Type::Null: reader.read_null(); return Value();
    case Type::Bool: return Value::boolean(reader.read_bool());
    case Type::Integer: return Value::integer(reader.read_integer());
    case Type::Number: return Value::number(reader.read_number());
    case Type::String: return Value::string(reader.read_string());
    case Type::Array: {
      Value array = Value::array();
      reader.begin_array();
      while (reader.next_item()) array.push_back(read_value(reader));
      return array;
    }
    case Type::Object: {
      Value object = Value::object();
      reader.begin_object();
      while (std::optional<std::string> key = reader.next_key()) object.add(std::move(*key), read_value(reader));
      return object;
    }
  }
  KILN_ASSERT(false, "json: unknown type");
  return Value();
}

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

// Between items: nothing (compact), or a line break and `depth` levels of `indent` spaces.
void append_break(std::string& out, int indent, int depth) {
  if (indent <= 0) return;
  out.push_back('\n');
  out.append(static_cast<size_t>(indent) * static_cast<size_t>(depth), ' ');
}

// An array or object: `open`, each item on its own line when indenting (written by
// append_item(i)), `close`; empty ones stay "[]" and "{}".
template <typename AppendItem>
void append_container(std::string& out, char open, char close, size_t count, int indent, int depth,
                      const AppendItem& append_item) {
  out.push_back(open);
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) out.push_back(',');
    append_break(out, indent, depth + 1);
    append_item(i);
  }
  if (count > 0) append_break(out, indent, depth);
  out.push_back(close);
}

void append_value(std::string& out, const Value& value, int indent, int depth) {
  switch (value.type()) {
    case Type::Null: out += "null"; return;
    case Type::Bool: out += value.as_bool() ? "true" : "false"; return;
    case Type::Integer: out += std::to_string(value.as_integer()); return;
    case Type::Number: append_number(out, value.as_number()); return;
    case Type::String: append_quoted(out, value.as_string()); return;
    case Type::Array: {
      const std::vector<Value>& items = value.as_array();
      append_container(out, '[', ']', items.size(), indent, depth,
                       [&](size_t i) { append_value(out, items[i], indent, depth + 1); });
      return;
    }
    case Type::Object: {
      const std::vector<Value::Member>& members = value.as_object();
      append_container(out, '{', '}', members.size(), indent, depth, [&](size_t i) {
        append_quoted(out, members[i].first);
        out += indent > 0 ? ": " : ":";
        append_value(out, members[i].second, indent, depth + 1);
      });
      return;
    }
  }
}

}  // namespace

Value parse(std::string_view text, ParseLimits limits) {
  Reader reader(text, limits);
  Value value = read_value(reader);
  reader.finish();
  return value;
}

Value parse_file(const std::string& path, ParseLimits limits) {
  const std::string text = read_text_file(path, "json");
  try {
    return parse(text, limits);
  } catch (const Error& e) {
    throw Error("json '" + path + "': " + e.what());
  }
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

std::string dump(const Value& value, int indent) {
  std::string out;
  append_value(out, value, indent, 0);
  return out;
}

}  // namespace kiln::json
