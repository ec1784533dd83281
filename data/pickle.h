// A restricted unpickler: Python's pickle format (protocols 2-5, the binary opcodes) read
// into a tree of plain values, with no code run and no class built, for reading PyTorch
// checkpoints (data/pth.h) without Python.
//
// Note [Restricted unpickling]: a pickle is a program for a stack machine: opcodes push
// values, build lists, tuples and dicts, look up a global (a module attribute, "os
// system"), and call one (REDUCE) with arguments from the stack. Python's unpickler calls
// whatever the stream names, which is why loading an untrusted .pth can run anything.
// This one understands only what a checkpoint needs, the same idea as PyTorch's
// torch.load(weights_only=True): the data opcodes, and globals from a fixed allow list,
// each with its own meaning here instead of a call:
//   collections.OrderedDict()                   -> an empty dict (BUILD's state kept apart)
//   torch._utils._rebuild_tensor_v2 / _rebuild_tensor (storage, offset, size, stride, ...)
//                                               -> a tensor description (Value::Tensor)
//   torch._utils._rebuild_parameter(_with_state) (tensor, requires_grad, ...) -> the tensor
//   torch.<X>Storage, torch.cuda.<X>Storage     -> a storage type, inside persistent ids
//   _codecs.encode(text, "latin1")              -> bytes (Python 3's way of pickling bytes
//                                                  at protocol 2)
// Any other global is refused by name at the opcode that names it, before anything could
// use it; so are the object-building opcodes (NEWOBJ, INST, OBJ), extensions and the text
// protocol-0 opcodes. A persistent id (BINPERSID) is handed to the caller's resolver,
// which turns ('storage', type, key, location, numel, ...) into a Value::Storage.
//
// Bounds: every length is checked against the bytes left; the stack, the mark stack and
// the memo are bounded (kMaxStack, kMaxMemo); values live in an arena owned by the
// Document, so self-references (a list appended into itself through the memo) are no
// leak and no crash; everything the values hold (the values themselves, their strings,
// items and entries, REDUCE's results) is charged to a byte budget the caller sets from
// the size of the file, so a small stream that builds the same large value again and
// again through the memo is refused, not followed into exhausted memory; walks over the tree (pth.cpp) limit
// their depth and their total visits, so a nesting or a "billion laughs" of shared references is an error,
// not a hang. Every problem is a kiln::Error naming the stream and the byte offset of the opcode.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace kiln::data::pickle {

inline constexpr size_t kMaxStack = 1 << 20;  // values on the stack (marks included)
inline constexpr size_t kMaxMemo = 1 << 24;   // memo entries

// A storage as a checkpoint's persistent id names it: the key of its bytes, their dtype,
// where they lived, their element count; `offset`/`view_numel` for the legacy format's
// storage views (a part of another storage), 0 / numel otherwise.
struct StorageRef {
  std::string key;
  DType dtype = DType::Float32;
  std::string type_name;  // "FloatStorage", ... (in messages)
  std::string location;   // "cpu", "cuda:0"
  int64_t numel = 0;
  int64_t offset = 0;
  int64_t view_numel = 0;
};

// A tensor as _rebuild_tensor_v2 describes it: a strided view of a storage.
struct TensorRef {
  StorageRef storage;
  int64_t offset = 0;  // in elements
  std::vector<int64_t> sizes, strides;
  bool requires_grad = false;
};

struct Value {
  enum class Kind {
    None,
    Bool,
    Int,
    BigInt,
    Float,
    String,
    Bytes,
    List,
    Tuple,
    Dict,
    Global,
    Storage,
    Tensor
  };
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0.0;
  std::string text;                                // String; Bytes; BigInt (little-endian two's complement)
  std::vector<Value*> items;                       // List, Tuple
  std::vector<std::pair<Value*, Value*>> entries;  // Dict, in insertion order
  std::string module, name;                        // Global
  std::unique_ptr<StorageRef> storage;             // Storage
  std::unique_ptr<TensorRef> tensor;               // Tensor
};

std::string_view kind_name(Value::Kind kind);  // "dict", "tensor", ...

// A storage class a checkpoint may name (torch.FloatStorage, ...): the Kiln dtype its
// elements load as (int8 and int16 widen to int32: Kiln holds neither) and their size in
// the file. Null for a name that is none of them.
struct StorageType {
  const char* name;
  DType dtype;
  int64_t file_element_size;
};
const StorageType* find_storage_type(std::string_view name);

// Turns a persistent id (the tuple BINPERSID pops) into a Value the document owns
// (Document::make), or throws a kiln::Error saying what is wrong with it.
class Document;
using PersistentLoad = std::function<Value*(Document&, const Value& id)>;

// The values of one pickle stream, owned together.
class Document {
 public:
  Value* root() const { return root_; }
  Value* make(Value::Kind kind);
  // Counts `bytes` against the budget; past it, a kiln::Error naming the stream.
  void charge(size_t bytes);
  // What messages call the stream ("resnet.pth: data.pkl").
  const std::string& name() const { return name_; }
  // Where the stream's STOP was: the byte after it (the legacy format reads on from there).
  size_t end() const { return end_; }

 private:
  friend Document unpickle(std::span<const uint8_t>, std::string, const PersistentLoad&, size_t);
  std::string name_;
  size_t budget_ = 0, used_ = 0;
  std::vector<std::unique_ptr<Value>> arena_;
  Value* root_ = nullptr;
  size_t end_ = 0;
};

// Reads one pickle from the start of `bytes` (trailing bytes are left for the caller).
// At most `max_value_bytes` of values (Document::charge) are built; the default allows
// 64 MiB and 32 bytes per byte of the stream.
Document unpickle(std::span<const uint8_t> bytes, std::string name,
                  const PersistentLoad& persistent_load = {}, size_t max_value_bytes = 0);

}  // namespace kiln::data::pickle
