// PyTorch checkpoints (pth.h): the zip and legacy containers around the restricted
// unpickler (data/pickle.h), persistent ids to storages, storages to tensors, and the
// bounded walk that flattens the object into named tensors and other leaves.
#include "data/pth.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "core/byte_source.h"
#include "core/checked_math.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/view.h"
#include "data/pickle.h"
#include "data/zip.h"

namespace kiln::data::pth {
namespace {

using pickle::StorageRef;
using pickle::TensorRef;
using pickle::Value;

// Every storage the pickle names, by key: its type and count (the same at every mention).
struct Storages {
  std::string file;  // for messages
  std::map<std::string, StorageRef> declared;
  std::map<std::string, Tensor> loaded;  // 1-d CPU tensors of `numel` elements

  // ('storage', type, key, location, numel) and, in the legacy format, a view: None or
  // (view key, offset, numel) of the storage `key`.
  Value* resolve(pickle::Document& doc, const Value& id, bool legacy) {
    const size_t expected = legacy ? 6 : 5;
    KILN_CHECK(id.kind == Value::Kind::Tuple && id.items.size() == expected &&
                   id.items[0]->kind == Value::Kind::String && id.items[0]->text == "storage",
               file, ": a persistent id that is not ('storage', type, key, location, numel",
               legacy ? ", view)" : ")");
    const Value& type = *id.items[1];
    const Value& key = *id.items[2];
    const Value& location = *id.items[3];
    const Value& numel = *id.items[4];
    KILN_CHECK(type.kind == Value::Kind::Global && key.kind == Value::Kind::String &&
                   location.kind == Value::Kind::String && numel.kind == Value::Kind::Int &&
                   numel.integer >= 0,
               file, ": a storage id with a ", pickle::kind_name(type.kind), " type, a ",
               pickle::kind_name(key.kind), " key, a ", pickle::kind_name(location.kind), " location and a ",
               pickle::kind_name(numel.kind), " count (or a negative one)");
    const pickle::StorageType* storage_type = pickle::find_storage_type(type.name);
    KILN_CHECK(storage_type != nullptr, file, ": storage type ", type.module, ".", type.name,
               " is not one Kiln reads");
    StorageRef ref{.key = key.text,
                   .dtype = storage_type->dtype,
                   .type_name = storage_type->name,
                   .location = location.text,
                   .numel = numel.integer,
                   .offset = 0,
                   .view_numel = numel.integer};
    declare(ref);
    if (legacy && id.items[5]->kind != Value::Kind::None) {
      const Value& view = *id.items[5];
      KILN_CHECK(view.kind == Value::Kind::Tuple && view.items.size() == 3 &&
                     view.items[0]->kind == Value::Kind::String && view.items[1]->kind == Value::Kind::Int &&
                     view.items[2]->kind == Value::Kind::Int,
                 file, ": a storage view that is not (key, offset, numel)");
      // The view is a part of `key`; the tensor's offsets count from the view's start.
      const int64_t offset = view.items[1]->integer, count = view.items[2]->integer;
      KILN_CHECK(offset >= 0 && count >= 0 && count <= ref.numel && offset <= ref.numel - count, file,
                 ": storage view ", view.items[0]->text, " of [", offset, ", ", offset, " + ", count,
                 ") lies outside its storage ", ref.key, " of ", ref.numel, " elements");
      ref.offset = offset;
      ref.view_numel = count;
    }
    Value* v = doc.make(Value::Kind::Storage);
    v->storage = std::make_unique<StorageRef>(ref);
    return v;
  }

  void declare(const StorageRef& ref) {
    const auto [it, inserted] = declared.emplace(ref.key, ref);
    KILN_CHECK(inserted || (it->second.dtype == ref.dtype && it->second.numel == ref.numel &&
                            it->second.type_name == ref.type_name),
               file, ": storage ", ref.key, " is declared twice, as ", it->second.type_name, " of ",
               it->second.numel, " and as ", ref.type_name, " of ", ref.numel);
  }
};

// Raw elements of `ref` (numel x the file's element size) into a fresh tensor: byte-swapped
// when the file is big-endian, int8/int16 widened to int32.
Tensor storage_from_bytes(const StorageRef& ref, const uint8_t* bytes, bool big_endian) {
  const pickle::StorageType& type = *pickle::find_storage_type(ref.type_name);
  const auto n = static_cast<size_t>(ref.numel);
  const auto size = static_cast<size_t>(type.file_element_size);
  std::vector<uint8_t> swapped;
  if (big_endian && size > 1) {
    swapped.assign(bytes, bytes + n * size);
    for (size_t i = 0; i < n; ++i) std::reverse(swapped.begin() + i * size, swapped.begin() + (i + 1) * size);
    bytes = swapped.data();
  }
  Tensor out = empty({ref.numel}, {.dtype = ref.dtype, .device = Device::cpu()});
  if (size == itemsize(ref.dtype)) {
    if (n > 0) std::memcpy(out.data_ptr(), bytes, n * size);
    return out;
  }
  auto* dst = static_cast<int32_t*>(out.data_ptr());  // CharStorage, ShortStorage
  for (size_t i = 0; i < n; ++i) {
    if (size == 1) {
      dst[i] = static_cast<int8_t>(bytes[i]);
    } else {
      int16_t v;
      std::memcpy(&v, bytes + 2 * i, 2);
      dst[i] = v;
    }
  }
  return out;
}

int64_t storage_bytes(const std::string& file, const StorageRef& ref) {
  const std::optional<int64_t> n =
      checked_mul(ref.numel, pickle::find_storage_type(ref.type_name)->file_element_size);
  KILN_CHECK(n.has_value(), file, ": storage ", ref.key, " of ", ref.numel,
             " elements overflows int64 bytes");
  return *n;
}

// ---- the walk -----------------------------------------------------------------------------

struct Walk {
  std::string file;
  std::vector<std::pair<std::string, const TensorRef*>> tensors;
  std::vector<std::string> roots;  // each tensor's top-level entry
  std::vector<std::pair<std::string, std::string>> others;
  std::set<std::string> paths;
  int64_t visits = 0, bytes = 0;

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string number(double v) {
    char text[64];
    const auto result = std::to_chars(text, text + sizeof text, v);
    return std::string(text, result.ptr);
  }
  // A leaf's text, cut at kMaxLeafText bytes.
  static std::string cut(std::string text) {
    if (text.size() <= kMaxLeafText) return text;
    const size_t n = text.size();
    text.resize(kMaxLeafText);
    return text + "... (" + std::to_string(n) + " bytes)";
  }
  std::string key_text(const Value& key, const std::string& path) {
    if (key.kind == Value::Kind::Int) return std::to_string(key.integer);
    KILN_CHECK(key.kind == Value::Kind::String, file, ": a dict under '", path, "' has a ",
               pickle::kind_name(key.kind), " key; only str and int keys are read");
    KILN_CHECK(key.text.size() <= kMaxKeyBytes, file, ": a dict under '", path, "' has a key of ",
               key.text.size(), " bytes (at most ", kMaxKeyBytes, " are read)");
    return key.text;
  }
  void leaf(const std::string& path, std::string text) {
    add_path(path, text.size());
    others.emplace_back(path, std::move(text));
  }
  void add_path(const std::string& path, size_t more) {
    bytes += static_cast<int64_t>(path.size() + more);
    KILN_CHECK(bytes <= kMaxWalkBytes, file, ": its entries' names and values come to more than ",
               kMaxWalkBytes, " bytes (the same entries referenced again and again?)");
    KILN_CHECK(paths.insert(path).second, file, ": two entries are named '", path, "'");
  }

  void visit(const Value& v, const std::string& path, int depth, const std::string& root) {
    KILN_CHECK(++visits <= kMaxVisits, file, ": the object has more than ", kMaxVisits,
               " entries counting shared ones each time (a reference bomb?)");
    KILN_CHECK(depth <= kMaxDepth, file, ": the object nests deeper than ", kMaxDepth, " levels at '", path,
               "'");
    switch (v.kind) {
      case Value::Kind::Dict:
        if (v.entries.empty()) leaf(path, "{}");
        for (const auto& [key, value] : v.entries) {
          const std::string name = key_text(*key, path);
          visit(*value, join(path, name), depth + 1, depth == 0 ? name : root);
        }
        return;
      case Value::Kind::List:
      case Value::Kind::Tuple:
        if (v.items.empty()) leaf(path, v.kind == Value::Kind::List ? "[]" : "()");
        for (size_t i = 0; i < v.items.size(); ++i) {
          visit(*v.items[i], join(path, std::to_string(i)), depth + 1, root);
        }
        return;
      case Value::Kind::Tensor:
        add_path(path, 0);
        tensors.emplace_back(path, v.tensor.get());
        roots.push_back(root);
        return;
      case Value::Kind::None:
        return leaf(path, "None");
      case Value::Kind::Bool:
        return leaf(path, v.boolean ? "True" : "False");
      case Value::Kind::Int:
        return leaf(path, std::to_string(v.integer));
      case Value::Kind::BigInt:
        return leaf(path, "<int of " + std::to_string(v.text.size()) + " bytes>");
      case Value::Kind::Float:
        return leaf(path, number(v.number));
      case Value::Kind::String:
        return leaf(path, cut("'" + v.text + "'"));
      case Value::Kind::Bytes:
        return leaf(path, "<" + std::to_string(v.text.size()) + " bytes>");
      case Value::Kind::Global:
        return leaf(path, "<" + v.module + "." + v.name + ">");
      case Value::Kind::Storage:
        return leaf(path, cut("<storage " + v.storage->key + ">"));
    }
  }
};

// The tensor `t` describes, from its loaded storage (Note [pth validation]).
Tensor materialize(const std::string& file, const std::string& path, const TensorRef& t,
                   const Tensor& storage) {
  const StorageRef& s = t.storage;
  KILN_CHECK(t.offset >= 0, file, ": tensor '", path, "' starts at a negative offset ", t.offset);
  std::optional<int64_t> numel = 1, last = t.offset;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    KILN_CHECK(t.sizes[d] >= 0 && t.strides[d] >= 0, file, ": tensor '", path, "' has sizes ", t.sizes,
               " and strides ", t.strides, " (negative)");
    numel = numel ? checked_mul(*numel, t.sizes[d]) : std::nullopt;
    if (t.sizes[d] > 0 && last) {
      const std::optional<int64_t> reach = checked_mul(t.sizes[d] - 1, t.strides[d]);
      last = reach ? checked_add(*last, *reach) : std::nullopt;
    }
  }
  KILN_CHECK(numel && last, file, ": tensor '", path, "' with sizes ", t.sizes, " and strides ", t.strides,
             " overflows int64");
  const TensorOptions options{.dtype = s.dtype, .device = Device::cpu()};
  if (*numel == 0) return empty(t.sizes, options);
  KILN_CHECK(*last < s.view_numel, file, ": tensor '", path, "' (offset ", t.offset, ", sizes ", t.sizes,
             ", strides ", t.strides, ") reaches element ", *last, " of storage ", s.key, ", which has ",
             s.view_numel, " elements");
  KILN_CHECK(*numel <= s.view_numel, file, ": tensor '", path, "' has ", *numel,
             " elements, more than its storage's ", s.view_numel,
             " (an expanded view, with a zero stride): each tensor loads as its own copy, so this is "
             "refused");
  return as_strided(storage, t.sizes, t.strides, s.offset + t.offset).contiguous();
}

Checkpoint assemble(const std::string& file, std::string format, const pickle::Document& doc,
                    const Storages& storages, int64_t file_bytes) {
  Walk walk{.file = file, .tensors = {}, .roots = {}, .others = {}, .paths = {}, .visits = 0, .bytes = 0};
  walk.visit(*doc.root(), "", 0, "");
  Checkpoint out{.format = std::move(format),
                 .tensors = {},
                 .others = std::move(walk.others),
                 .tensor_roots = std::move(walk.roots)};
  // Each tensor is its own copy: references to one storage repeated (through the memo) may
  // not make the copies outgrow the file by more than kMaxGrowth.
  int64_t copied = 0;
  for (const auto& [path, t] : walk.tensors) {
    std::optional<int64_t> numel = 1;  // (a count that overflows is materialize's to report)
    for (int64_t size : t->sizes) numel = numel ? checked_mul(*numel, size) : std::nullopt;
    const std::optional<int64_t> nbytes =
        numel ? checked_mul(*numel, static_cast<int64_t>(itemsize(t->storage.dtype))) : std::nullopt;
    if (nbytes && *nbytes > 0) copied = checked_add(copied, *nbytes).value_or(INT64_MAX);
  }
  const int64_t limit = kMaxGrowth * file_bytes + (int64_t{64} << 20);
  KILN_CHECK(copied <= limit, file, ": its ", walk.tensors.size(), " tensors would copy ", copied,
             " bytes out of a file of ", file_bytes, " (one storage referenced again and again?)");
  for (size_t i = 0; i < walk.tensors.size(); ++i) {
    const auto& [path, t] = walk.tensors[i];
    out.tensors.emplace_back(path, materialize(file, path, *t, storages.loaded.at(t->storage.key)));
  }
  return out;
}

// The budget of the unpickler's values and of the storages, from the file's size.
size_t value_budget(int64_t file_bytes) { return (size_t{64} << 20) + 32 * static_cast<size_t>(file_bytes); }

void check_inflation(const std::string& file, int64_t storage_bytes_so_far, int64_t file_bytes) {
  KILN_CHECK(storage_bytes_so_far <= kMaxInflation * file_bytes + (int64_t{64} << 20), file,
             ": its storages hold ", storage_bytes_so_far, " bytes or more, from a file of ", file_bytes,
             " (deflated far beyond what PyTorch writes): refused");
}

// ---- zip ------------------------------------------------------------------------------

Checkpoint load_zip(const zip::Archive& archive, int64_t file_bytes) {
  const std::string& file = archive.name();
  std::string prefix;
  const zip::Entry* pickle_entry = nullptr;
  for (const zip::Entry& e : archive.entries()) {
    const size_t slash = e.name.find('/');
    if (slash == std::string::npos || e.name.substr(slash + 1) != "data.pkl") continue;
    KILN_CHECK(pickle_entry == nullptr, file, ": two data.pkl members (",
               pickle_entry ? pickle_entry->name : "", " and ", e.name, ")");
    pickle_entry = &e;
    prefix = e.name.substr(0, slash + 1);
  }
  KILN_CHECK(pickle_entry != nullptr, file, ": a zip without <folder>/data.pkl: not a PyTorch checkpoint");
  bool big_endian = false;
  if (const zip::Entry* order = archive.find(prefix + "byteorder")) {
    const std::vector<uint8_t> text = archive.read(*order);
    const std::string value(text.begin(), text.end());
    KILN_CHECK(value == "little" || value == "big", file, ": byteorder is '", value.substr(0, 16),
               "', not little or big");
    big_endian = value == "big";
  }
  Storages storages{.file = file, .declared = {}, .loaded = {}};
  const std::vector<uint8_t> pickle_bytes = archive.read(*pickle_entry);
  const pickle::Document doc = pickle::unpickle(
      pickle_bytes, file + ": " + pickle_entry->name,
      [&](pickle::Document& d, const Value& id) { return storages.resolve(d, id, /*legacy=*/false); },
      value_budget(file_bytes));
  int64_t stored = 0;
  for (const auto& [key, ref] : storages.declared) {
    const zip::Entry* entry = archive.find(prefix + "data/" + key);
    KILN_CHECK(entry != nullptr, file, ": storage ", key, " (", ref.type_name, " of ", ref.numel,
               ") has no member ", prefix, "data/", key);
    const int64_t bytes = storage_bytes(file, ref);
    KILN_CHECK(entry->size == bytes, file, ": storage ", key, " holds ", entry->size, " bytes, but its ",
               ref.numel, " ", ref.type_name, " elements need ", bytes);
    stored = checked_add(stored, bytes).value_or(INT64_MAX);
    check_inflation(file, stored, file_bytes);
    if (!big_endian && pickle::find_storage_type(ref.type_name)->file_element_size ==
                           static_cast<int64_t>(itemsize(ref.dtype))) {
      // The member's bytes are the tensor's: inflated (or copied) straight into it.
      Tensor storage = empty({ref.numel}, {.dtype = ref.dtype, .device = Device::cpu()});
      zip::MemberReader reader(archive, *entry, file + "/" + entry->name);
      if (bytes > 0) reader.read(0, storage.data_ptr(), bytes);
      reader.finish();
      storages.loaded.emplace(key, storage);
      continue;
    }
    const std::vector<uint8_t> data = archive.read(*entry);  // to swap or widen
    storages.loaded.emplace(key, storage_from_bytes(ref, data.data(), big_endian));
  }
  return assemble(file, "zip", doc, storages, file_bytes);
}

// ---- legacy ---------------------------------------------------------------------------

Checkpoint load_legacy(std::span<const uint8_t> bytes, const std::string& file) {
  const auto file_bytes = static_cast<int64_t>(bytes.size());
  // A pickle of protocol 2 or later starts with PROTO (0x80): anything else is some other
  // kind of file.
  KILN_CHECK(
      bytes.size() >= 2 && bytes[0] == 0x80, file,
      ": not a PyTorch checkpoint (neither a zip archive nor a legacy pickle stream of protocol 2 or later)");
  size_t at = 0;
  const auto next = [&](const char* what, const pickle::PersistentLoad& resolve = {}) {
    pickle::Document doc =
        pickle::unpickle(bytes.subspan(at), file + ": " + what, resolve, value_budget(file_bytes));
    at += doc.end();
    return doc;
  };
  // 0x1950a86a20f9469cfc6c, little-endian.
  static constexpr uint8_t kMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  const pickle::Document magic = next("magic number");
  KILN_CHECK(magic.root()->kind == Value::Kind::BigInt && magic.root()->text.size() == sizeof kMagic &&
                 std::memcmp(magic.root()->text.data(), kMagic, sizeof kMagic) == 0,
             file, ": not a PyTorch checkpoint (no zip archive, and no legacy magic number)");
  const pickle::Document version = next("protocol version");
  KILN_CHECK(version.root()->kind == Value::Kind::Int && version.root()->integer == 1001, file,
             ": legacy protocol version is not 1001");
  const pickle::Document sys_info = next("system info");
  bool big_endian = false;
  if (sys_info.root()->kind == Value::Kind::Dict) {
    for (const auto& [key, value] : sys_info.root()->entries) {
      if (key->kind == Value::Kind::String && key->text == "little_endian" &&
          value->kind == Value::Kind::Bool) {
        big_endian = !value->boolean;
      }
    }
  }
  Storages storages{.file = file, .declared = {}, .loaded = {}};
  const pickle::Document doc = next("object", [&](pickle::Document& d, const Value& id) {
    return storages.resolve(d, id, /*legacy=*/true);
  });
  const pickle::Document keys = next("storage keys");
  KILN_CHECK(keys.root()->kind == Value::Kind::List, file, ": the storage keys are a ",
             pickle::kind_name(keys.root()->kind), ", not a list");
  for (const Value* key : keys.root()->items) {
    KILN_CHECK(key->kind == Value::Kind::String, file, ": a storage key that is a ",
               pickle::kind_name(key->kind));
    const auto it = storages.declared.find(key->text);
    KILN_CHECK(it != storages.declared.end(), file, ": storage ", key->text, " is listed but never used");
    KILN_CHECK(!storages.loaded.contains(key->text), file, ": storage ", key->text, " is listed twice");
    const StorageRef& ref = it->second;
    KILN_CHECK(bytes.size() - at >= 8, file, ": the file ends before storage ", key->text,
               "'s element count");
    uint64_t count = 0;
    for (int i = 0; i < 8; ++i)
      count |= static_cast<uint64_t>(bytes[at + static_cast<size_t>(big_endian ? 7 - i : i)]) << (8 * i);
    at += 8;
    KILN_CHECK(count == static_cast<uint64_t>(ref.numel), file, ": storage ", key->text, " holds ", count,
               " elements, but the pickle declared ", ref.numel);
    const int64_t n = storage_bytes(file, ref);
    KILN_CHECK(static_cast<uint64_t>(n) <= bytes.size() - at, file, ": the file ends inside storage ",
               key->text, " (", n, " bytes needed, ", bytes.size() - at, " left)");
    storages.loaded.emplace(key->text, storage_from_bytes(ref, bytes.data() + at, big_endian));
    at += static_cast<size_t>(n);
  }
  for (const auto& [key, ref] : storages.declared) {
    KILN_CHECK(storages.loaded.contains(key), file, ": storage ", key,
               " is used but its data is not in the file");
  }
  return assemble(file, "legacy", doc, storages, file_bytes);
}

bool is_zip(std::span<const uint8_t> head) {
  return head.size() >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4;
}

}  // namespace

Checkpoint load_from_bytes(std::span<const uint8_t> bytes, std::string_view name) {
  if (is_zip(bytes)) return load_zip(zip::Archive(bytes, name), static_cast<int64_t>(bytes.size()));
  return load_legacy(bytes, std::string(name));
}

Checkpoint load(const std::string& path) {
  const FileSource source(path, "pth");
  uint8_t head[4] = {0, 0, 0, 0};
  if (source.size() >= 4) source.read(0, head, 4);
  if (is_zip(head)) return load_zip(zip::Archive(path), source.size());
  // A legacy file starts with a pickle's PROTO opcode and protocol (2 to 5): anything else
  // is refused before the file is read into memory (a large file that is no checkpoint is
  // not loaded whole).
  KILN_CHECK(source.size() >= 4 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5, path,
             ": not a PyTorch checkpoint (neither a zip archive nor a legacy pickle stream of protocol 2 or later)");
  std::vector<uint8_t> bytes(static_cast<size_t>(source.size()));
  if (!bytes.empty()) source.read(0, bytes.data(), source.size());
  return load_legacy(bytes, path);
}

safetensors::NamedTensors state_dict(const Checkpoint& checkpoint, std::string* found_under) {
  for (const char* key : {"state_dict", "model_state_dict", "model", "state", "net", "weights"}) {
    const size_t skip = std::string_view(key).size() + 1;  // "key."
    safetensors::NamedTensors under;
    for (size_t i = 0; i < checkpoint.tensors.size(); ++i) {
      if (i < checkpoint.tensor_roots.size() && checkpoint.tensor_roots[i] == key &&
          checkpoint.tensors[i].first.size() > skip) {
        under.emplace_back(checkpoint.tensors[i].first.substr(skip), checkpoint.tensors[i].second);
      }
    }
    if (under.empty()) continue;
    if (found_under) *found_under = key;
    return under;
  }
  if (found_under) *found_under = "";
  return checkpoint.tensors;
}

}  // namespace kiln::data::pth
