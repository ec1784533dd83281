// The restricted unpickler (pickle.h, Note [Restricted unpickling]): a stack machine over
// the binary opcodes, an allow list of globals with their meaning here, and bounds on
// everything a stream can make grow.
#include "data/pickle.h"

#include <cstring>
#include <unordered_map>

#include "core/error.h"

namespace kiln::data::pickle {

std::string_view kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::None:
      return "None";
    case Value::Kind::Bool:
      return "bool";
    case Value::Kind::Int:
      return "int";
    case Value::Kind::BigInt:
      return "int (beyond 64 bits)";
    case Value::Kind::Float:
      return "float";
    case Value::Kind::String:
      return "str";
    case Value::Kind::Bytes:
      return "bytes";
    case Value::Kind::List:
      return "list";
    case Value::Kind::Tuple:
      return "tuple";
    case Value::Kind::Dict:
      return "dict";
    case Value::Kind::Global:
      return "global";
    case Value::Kind::Storage:
      return "storage";
    case Value::Kind::Tensor:
      return "tensor";
  }
  return "?";
}

void Document::charge(size_t bytes) {
  used_ += bytes;
  KILN_CHECK(used_ <= budget_, name_, ": the pickle builds more than ", budget_,
             " bytes of values, far more than its file holds: refused (the same large value built again and "
             "again through the memo?)");
}

Value* Document::make(Value::Kind kind) {
  charge(sizeof(Value) + sizeof(std::unique_ptr<Value>));
  arena_.push_back(std::make_unique<Value>());
  arena_.back()->kind = kind;
  return arena_.back().get();
}

namespace {

constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", DType::Float32, 4}, {"DoubleStorage", DType::Float64, 8},
    {"HalfStorage", DType::Float16, 2},  {"BFloat16Storage", DType::BFloat16, 2},
    {"LongStorage", DType::Int64, 8},    {"IntStorage", DType::Int32, 4},
    {"ShortStorage", DType::Int32, 2},   {"CharStorage", DType::Int32, 1},
    {"ByteStorage", DType::UInt8, 1},    {"BoolStorage", DType::Bool, 1},
};

}  // namespace

const StorageType* find_storage_type(std::string_view name) {
  for (const StorageType& t : kStorageTypes) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

namespace {

bool is_allowed_global(const std::string& module, const std::string& name) {
  if (module == "collections" && name == "OrderedDict") return true;
  if (module == "_codecs" && name == "encode") return true;
  if (module == "torch._utils") {
    return name == "_rebuild_tensor_v2" || name == "_rebuild_tensor" || name == "_rebuild_parameter" ||
           name == "_rebuild_parameter_with_state";
  }
  return (module == "torch" || module == "torch.cuda") && find_storage_type(name) != nullptr;
}

class Machine {
 public:
  Machine(std::span<const uint8_t> bytes, Document& doc, const PersistentLoad& persistent_load)
      : bytes_(bytes), doc_(doc), persistent_load_(persistent_load) {}

  void run();

 private:
  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    KILN_CHECK(false, doc_.name(), ": ", parts..., " (opcode at byte ", op_at_, ")");
    __builtin_unreachable();
  }
  const uint8_t* take(size_t n) {
    if (n > bytes_.size() - pos_) fail("the stream ends inside an opcode's argument (truncated)");
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  uint64_t little(size_t n) {
    const uint8_t* p = take(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
  }
  std::string take_string(uint64_t n) {
    if (n > bytes_.size() - pos_) fail("a string of ", n, " bytes runs past the stream's end");
    doc_.charge(static_cast<size_t>(n));
    const uint8_t* p = take(static_cast<size_t>(n));
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  }
  std::string take_line() {  // GLOBAL's newline-terminated arguments
    const size_t start = pos_;
    while (pos_ < bytes_.size() && bytes_[pos_] != '\n') {
      if (pos_ - start > 256) fail("a global's name is longer than 256 bytes");
      ++pos_;
    }
    if (pos_ == bytes_.size()) fail("the stream ends inside a global's name (truncated)");
    ++pos_;
    return std::string(reinterpret_cast<const char*>(bytes_.data() + start), pos_ - 1 - start);
  }

  void push(Value* v) {
    if (stack_.size() >= kMaxStack) fail("more than ", kMaxStack, " values on the stack");
    stack_.push_back(v);
  }
  Value* pop() {
    if (stack_.size() <= floor()) fail("the stack is empty (or holds only a mark)");
    Value* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value* top() {
    if (stack_.size() <= floor()) fail("the stack is empty (or holds only a mark)");
    return stack_.back();
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  // The values since the last mark, which is dropped.
  std::vector<Value*> pop_mark() {
    if (marks_.empty()) fail("no mark to pop to");
    const size_t at = marks_.back();
    marks_.pop_back();
    std::vector<Value*> items(stack_.begin() + static_cast<std::ptrdiff_t>(at), stack_.end());
    stack_.resize(at);
    return items;
  }

  Value* make(Value::Kind kind) { return doc_.make(kind); }
  Value* integer(int64_t v) {
    Value* x = make(Value::Kind::Int);
    x->integer = v;
    return x;
  }
  Value* long_integer(size_t n);
  Value* tuple(std::vector<Value*> items) {
    Value* t = make(Value::Kind::Tuple);
    doc_.charge(items.size() * sizeof(Value*));
    t->items = std::move(items);
    return t;
  }
  void memo_put(uint64_t index) {
    if (memo_.size() >= kMaxMemo && !memo_.contains(index)) fail("more than ", kMaxMemo, " memo entries");
    if (!memo_.contains(index)) doc_.charge(64);  // a hash-map node
    memo_[index] = top();
  }
  Value* memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo entry ", index, " read before it was written");
    return it->second;
  }
  void global(const std::string& module, const std::string& name) {
    if (!is_allowed_global(module, name)) {
      if (module == "torch" || module.starts_with("torch.")) {
        fail("refused global ", module, ".", name,
             ": not one of the types a state dict of float, int, uint8 and bool tensors needs, which is all "
             "Kiln "
             "reads");
      }
      fail("refused global ", module, ".", name,
           ": only what a state dict needs is allowed (tensors, storages, OrderedDict); this file may try to "
           "run "
           "code");
    }
    Value* g = make(Value::Kind::Global);
    g->module = module;
    g->name = name;
    push(g);
  }
  void set_items(Value* dict, const std::vector<Value*>& items) {
    if (dict->kind != Value::Kind::Dict) fail("SETITEM(S) on a ", kind_name(dict->kind), ", not a dict");
    if (items.size() % 2 != 0) fail("SETITEMS with an odd number of values");
    doc_.charge(items.size() * sizeof(Value*));
    for (size_t i = 0; i < items.size(); i += 2) dict->entries.emplace_back(items[i], items[i + 1]);
  }
  void append(Value* list, const std::vector<Value*>& items) {
    if (list->kind != Value::Kind::List) fail("APPEND(S) on a ", kind_name(list->kind), ", not a list");
    doc_.charge(items.size() * sizeof(Value*));
    list->items.insert(list->items.end(), items.begin(), items.end());
  }
  Value* reduce(const Value& callable, const Value& args);
  Value* rebuild_tensor(const Value& args, bool v2);
  std::vector<int64_t> int_tuple(const Value& v, const char* what);

  std::span<const uint8_t> bytes_;
  Document& doc_;
  const PersistentLoad& persistent_load_;
  size_t pos_ = 0, op_at_ = 0;
  std::vector<Value*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value*> memo_;

  friend Document kiln::data::pickle::unpickle(std::span<const uint8_t>, std::string, const PersistentLoad&,
                                               size_t);
};

Value* Machine::long_integer(size_t n) {
  const uint8_t* p = take(n);
  if (n <= 8) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    if (n > 0 && n < 8 && (p[n - 1] & 0x80) != 0) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return integer(static_cast<int64_t>(v));
  }
  Value* big = make(Value::Kind::BigInt);
  big->text.assign(reinterpret_cast<const char*>(p), n);
  return big;
}

std::vector<int64_t> Machine::int_tuple(const Value& v, const char* what) {
  if (v.kind != Value::Kind::Tuple && v.kind != Value::Kind::List) {
    fail("a tensor's ", what, " is a ", kind_name(v.kind), ", not a tuple of ints");
  }
  std::vector<int64_t> out;
  for (const Value* item : v.items) {
    if (item->kind != Value::Kind::Int) fail("a tensor's ", what, " holds a ", kind_name(item->kind));
    out.push_back(item->integer);
  }
  return out;
}

// _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, hooks[, metadata])
// or the older _rebuild_tensor(storage, storage_offset, size, stride).
Value* Machine::rebuild_tensor(const Value& args, bool v2) {
  const size_t n = args.items.size();
  if (n < 4 || (!v2 && n != 4) || n > 7) fail("_rebuild_tensor", v2 ? "_v2" : "", " with ", n, " arguments");
  const Value& storage = *args.items[0];
  if (storage.kind != Value::Kind::Storage)
    fail("a tensor rebuilt from a ", kind_name(storage.kind), ", not a storage");
  if (args.items[1]->kind != Value::Kind::Int)
    fail("a tensor's storage offset is a ", kind_name(args.items[1]->kind));
  Value* t = make(Value::Kind::Tensor);
  doc_.charge(sizeof(TensorRef) + storage.storage->key.size() + storage.storage->type_name.size() +
              storage.storage->location.size() + 2 * sizeof(int64_t) * args.items[2]->items.size());
  t->tensor = std::make_unique<TensorRef>();
  t->tensor->storage = *storage.storage;
  t->tensor->offset = args.items[1]->integer;
  t->tensor->sizes = int_tuple(*args.items[2], "size");
  t->tensor->strides = int_tuple(*args.items[3], "stride");
  if (t->tensor->sizes.size() != t->tensor->strides.size())
    fail("a tensor with more sizes than strides or fewer");
  if (n > 4 && args.items[4]->kind == Value::Kind::Bool) t->tensor->requires_grad = args.items[4]->boolean;
  return t;
}

Value* Machine::reduce(const Value& callable, const Value& args) {
  if (callable.kind != Value::Kind::Global)
    fail("REDUCE calls a ", kind_name(callable.kind), ", not a global");
  if (args.kind != Value::Kind::Tuple)
    fail("REDUCE's arguments are a ", kind_name(args.kind), ", not a tuple");
  const std::string& name = callable.name;
  if (name == "OrderedDict") {
    Value* dict = make(Value::Kind::Dict);
    if (args.items.empty()) return dict;
    if (args.items.size() != 1 || args.items[0]->kind != Value::Kind::List)
      fail("OrderedDict(...) arguments");
    for (const Value* pair : args.items[0]->items) {
      if ((pair->kind != Value::Kind::List && pair->kind != Value::Kind::Tuple) || pair->items.size() != 2) {
        fail("OrderedDict([...]) with an item that is not a pair");
      }
      dict->entries.emplace_back(pair->items[0], pair->items[1]);
    }
    doc_.charge(dict->entries.size() * sizeof(dict->entries[0]));
    return dict;
  }
  if (name == "_rebuild_tensor_v2" || name == "_rebuild_tensor")
    return rebuild_tensor(args, name.ends_with("v2"));
  if (name == "_rebuild_parameter" || name == "_rebuild_parameter_with_state") {
    if (args.items.empty() || args.items[0]->kind != Value::Kind::Tensor)
      fail(name, " of something not a tensor");
    return args.items[0];
  }
  if (name == "encode") {  // _codecs.encode(text, "latin1"): how protocol 2 pickles bytes
    if (args.items.size() != 2 || args.items[0]->kind != Value::Kind::String ||
        args.items[1]->kind != Value::Kind::String ||
        (args.items[1]->text != "latin1" && args.items[1]->text != "latin-1")) {
      fail("_codecs.encode other than (str, 'latin1')");
    }
    Value* bytes = make(Value::Kind::Bytes);
    const std::string& utf8 = args.items[0]->text;
    doc_.charge(utf8.size());
    for (size_t i = 0; i < utf8.size(); ++i) {  // code points below 256, from UTF-8
      const auto c = static_cast<uint8_t>(utf8[i]);
      if (c < 0x80) {
        bytes->text.push_back(static_cast<char>(c));
      } else if ((c == 0xC2 || c == 0xC3) && i + 1 < utf8.size()) {
        bytes->text.push_back(
            static_cast<char>(((c & 0x03) << 6) | (static_cast<uint8_t>(utf8[++i]) & 0x3F)));
      } else {
        fail("_codecs.encode of a character beyond latin-1");
      }
    }
    return bytes;
  }
  fail("REDUCE of ", callable.module, ".", name, ", which is a type, not a function");
}

void Machine::run() {
  while (true) {
    op_at_ = pos_;
    const uint8_t op = *take(1);
    switch (op) {
      case 0x80: {  // PROTO
        const uint8_t version = *take(1);
        if (version > 5) fail("pickle protocol ", static_cast<int>(version), " (this reader knows 2 to 5)");
        break;
      }
      case 0x95:
        take(8);
        break;  // FRAME: a length prefix only
      case '.':
        return;  // STOP
      case '(':  // MARK
        if (marks_.size() >= kMaxStack) fail("more than ", kMaxStack, " marks");
        marks_.push_back(stack_.size());
        break;
      case '0':
        pop();
        break;  // POP
      case '1':
        pop_mark();
        break;  // POP_MARK
      case '2':
        push(top());
        break;  // DUP
      case 'N':
        push(make(Value::Kind::None));
        break;
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        Value* b = make(Value::Kind::Bool);
        b->boolean = op == 0x88;
        push(b);
        break;
      }
      case 'J':
        push(integer(static_cast<int32_t>(little(4))));
        break;  // BININT
      case 'K':
        push(integer(static_cast<int64_t>(little(1))));
        break;  // BININT1
      case 'M':
        push(integer(static_cast<int64_t>(little(2))));
        break;  // BININT2
      case 0x8a:
        push(long_integer(little(1)));
        break;      // LONG1
      case 0x8b: {  // LONG4
        const uint64_t n = little(4);
        if (n > bytes_.size() - pos_) fail("a LONG4 of ", n, " bytes runs past the stream's end");
        push(long_integer(static_cast<size_t>(n)));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        const uint8_t* p = take(8);
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[i];
        Value* f = make(Value::Kind::Float);
        std::memcpy(&f->number, &bits, sizeof bits);
        push(f);
        break;
      }
      case 'X':    // BINUNICODE
      case 0x8c:   // SHORT_BINUNICODE
      case 0x8d:   // BINUNICODE8
      case 'T':    // BINSTRING (Python 2 str)
      case 'U': {  // SHORT_BINSTRING
        const uint64_t n = op == 0x8c || op == 'U' ? little(1) : op == 0x8d ? little(8) : little(4);
        Value* s = make(Value::Kind::String);
        s->text = take_string(n);
        push(s);
        break;
      }
      case 'B':
      case 'C':
      case 0x8e: {  // BINBYTES, SHORT_BINBYTES, BINBYTES8
        const uint64_t n = op == 'C' ? little(1) : op == 0x8e ? little(8) : little(4);
        Value* s = make(Value::Kind::Bytes);
        s->text = take_string(n);
        push(s);
        break;
      }
      case ')':
        push(tuple({}));
        break;  // EMPTY_TUPLE
      case 't':
        push(tuple(pop_mark()));
        break;  // TUPLE
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const size_t n = op - 0x84u;
        if (stack_.size() < floor() + n) fail("TUPLE", n, " with fewer than ", n, " values on the stack");
        std::vector<Value*> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        push(tuple(std::move(items)));
        break;
      }
      case ']':   // EMPTY_LIST
      case 0x8f:  // EMPTY_SET (a list here)
        push(make(Value::Kind::List));
        break;
      case 'l': {  // LIST
        Value* list = make(Value::Kind::List);
        list->items = pop_mark();
        push(list);
        break;
      }
      case 0x91: {  // FROZENSET (a list here)
        Value* list = make(Value::Kind::List);
        list->items = pop_mark();
        push(list);
        break;
      }
      case 'a': {  // APPEND
        Value* item = pop();
        append(top(), {item});
        break;
      }
      case 'e':     // APPENDS
      case 0x90: {  // ADDITEMS
        std::vector<Value*> items = pop_mark();
        append(top(), items);
        break;
      }
      case '}':
        push(make(Value::Kind::Dict));
        break;     // EMPTY_DICT
      case 'd': {  // DICT
        Value* dict = make(Value::Kind::Dict);
        set_items(dict, pop_mark());
        push(dict);
        break;
      }
      case 's': {  // SETITEM
        Value* value = pop();
        Value* key = pop();
        set_items(top(), {key, value});
        break;
      }
      case 'u': {  // SETITEMS
        std::vector<Value*> items = pop_mark();
        set_items(top(), items);
        break;
      }
      case 'c': {  // GLOBAL "module\nname\n"
        const std::string module = take_line();
        const std::string name = take_line();
        global(module, name);
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        Value* name = pop();
        Value* module = pop();
        if (module->kind != Value::Kind::String || name->kind != Value::Kind::String) {
          fail("STACK_GLOBAL of a ", kind_name(module->kind), " and a ", kind_name(name->kind));
        }
        global(module->text, name->text);
        break;
      }
      case 'q':
        memo_put(little(1));
        break;  // BINPUT
      case 'r':
        memo_put(little(4));
        break;  // LONG_BINPUT
      case 0x94:
        memo_put(memo_.size());
        break;  // MEMOIZE
      case 'h':
        push(memo_get(little(1)));
        break;  // BINGET
      case 'j':
        push(memo_get(little(4)));
        break;     // LONG_BINGET
      case 'R': {  // REDUCE
        Value* args = pop();
        Value* callable = pop();
        push(reduce(*callable, *args));
        break;
      }
      case 'b': {  // BUILD: an object's state; kept for nothing here (a state dict's _metadata)
        Value* state = pop();
        (void)state;
        const Value* target = top();
        if (target->kind != Value::Kind::Dict && target->kind != Value::Kind::Tensor) {
          fail("BUILD on a ", kind_name(target->kind));
        }
        break;
      }
      case 'Q': {  // BINPERSID
        Value* id = pop();
        if (!persistent_load_) fail("a persistent id, which this stream's reader does not resolve");
        push(persistent_load_(doc_, *id));
        break;
      }
      case 0x81:
        fail("NEWOBJ builds an object: refused");
      case 0x92:
        fail("NEWOBJ_EX builds an object: refused");
      case 'i':
        fail("INST builds an object: refused");
      case 'o':
        fail("OBJ builds an object: refused");
      case 0x82:
      case 0x83:
      case 0x84:
        fail("extension registry opcodes are refused");
      default:
        fail("unsupported opcode 0x", "0123456789abcdef"[op >> 4], "0123456789abcdef"[op & 15],
             " (protocol-0 text opcodes and anything a state dict does not need are refused)");
    }
  }
}

}  // namespace

Document unpickle(std::span<const uint8_t> bytes, std::string name, const PersistentLoad& persistent_load,
                  size_t max_value_bytes) {
  Document doc;
  doc.name_ = std::move(name);
  doc.budget_ = max_value_bytes != 0 ? max_value_bytes : (size_t{64} << 20) + 32 * bytes.size();
  Machine machine(bytes, doc, persistent_load);
  machine.run();
  KILN_CHECK(!machine.stack_.empty(), doc.name_, ": STOP with an empty stack (opcode at byte ",
             machine.op_at_, ")");
  doc.root_ = machine.stack_.back();
  doc.end_ = machine.pos_;
  return doc;
}

}  // namespace kiln::data::pickle
