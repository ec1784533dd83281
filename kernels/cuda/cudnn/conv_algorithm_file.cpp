// The algorithm cache file of Note [Algorithm cache file] (conv_algorithm_file.h): the
// text written through the one atomic writer (core/atomic_file.h), and a strict line
// parser that turns every defect into a kiln::Error naming the file and the line, then
// passes each entry through the algorithm rules (usable_ranking) before it is cached.
#include "kernels/cuda/cudnn/conv_algorithm_file.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "core/atomic_file.h"
#include "core/error.h"

namespace kiln::cuda {
namespace {

constexpr std::string_view kMagic = "kiln-cudnn-algorithms";
constexpr int kFormatVersion = 2;  // 2: the filter's layout (filter=nchw|nhwc)
constexpr int kHeaderLines = 4;

// ---- writing ------------------------------------------------------------------------------

std::string join(IntList values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  return out;
}

std::string entry_line(const ConvKey& key, const ConvAlgorithmCache::Entry& entry) {
  std::ostringstream os;
  os << "pass=" << conv_pass_name(key.pass) << " device=" << key.device << " dtype=" << dtype_name(key.dtype)
     << " math=" << conv_math_name(key.math) << " deterministic=" << int{key.deterministic}
     << " groups=" << key.groups << " input=" << join(key.input_sizes)
     << " input_strides=" << join(key.input_strides) << " weight=" << join(key.weight_sizes)
     << " filter=" << (key.channels_last_filter ? "nhwc" : "nchw") << " stride=" << join(key.stride)
     << " padding=" << join(key.padding) << " dilation=" << join(key.dilation)
     << " searched=" << int{entry.searched} << " algos=";
  for (size_t i = 0; i < entry.ranking.size(); ++i) {
    const ConvAlgorithm& a = entry.ranking[i];
    os << (i ? "," : "") << a.algo << ':' << conv_math_name(a.math) << ':' << a.workspace_bytes << ':'
       << int{a.deterministic};
  }
  os << '\n';
  return os.str();
}

std::string file_text(const AlgorithmCacheIdentity& identity,
                      const std::vector<std::pair<ConvKey, ConvAlgorithmCache::Entry>>& entries) {
  std::string text = std::string(kMagic) + " " + std::to_string(kFormatVersion) + "\n";
  text += "gpu " + identity.gpu + "\n";
  text += "cudnn " + std::to_string(identity.cudnn_version) + "\n";
  text += "entries " + std::to_string(entries.size()) + "\n";
  for (const auto& [key, entry] : entries) text += entry_line(key, entry);
  return text;
}

// ---- reading ------------------------------------------------------------------------------

// Parses one line of `source` (the file); every failure names the file and the line.
class LineParser {
 public:
  LineParser(std::string_view source, size_t line_number, std::string_view line)
      : source_(source), line_number_(line_number), rest_(line) {}

  [[noreturn]] void fail(const std::string& problem) const {
    KILN_CHECK(false, "load_algorithm_cache: ", source_, ":", line_number_, ": ", problem);
    __builtin_unreachable();
  }

  // The value of the next field, which must be `name=value`.
  std::string_view field(std::string_view name) {
    const size_t end = rest_.find(' ');
    const std::string_view token = rest_.substr(0, end);
    rest_ = end == std::string_view::npos ? std::string_view() : rest_.substr(end + 1);
    if (token.size() <= name.size() || token.substr(0, name.size()) != name || token[name.size()] != '=') {
      fail("expected the field '" + std::string(name) + "=...', found '" + std::string(token.substr(0, 40)) + "'");
    }
    return token.substr(name.size() + 1);
  }

  void expect_end() const {
    if (!rest_.empty()) fail("unexpected text after the last field: '" + std::string(rest_.substr(0, 40)) + "'");
  }

  int64_t integer(std::string_view text, int64_t min, int64_t max, std::string_view what) const {
    int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < min || value > max) {
      fail(std::string(what) + " '" + std::string(text.substr(0, 40)) + "' is not an integer in [" +
           std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    return value;
  }

  // A comma-separated list of at most kMaxListLength integers in [min, max].
  std::vector<int64_t> list(std::string_view name, int64_t min, int64_t max) {
    constexpr size_t kMaxListLength = 5;  // [N, C, D, H, W]
    std::string_view text = field(name);
    std::vector<int64_t> values;
    while (true) {
      if (values.size() == kMaxListLength) fail(std::string(name) + " has more than 5 values");
      const size_t comma = text.find(',');
      values.push_back(integer(text.substr(0, comma), min, max, name));
      if (comma == std::string_view::npos) return values;
      text = text.substr(comma + 1);
    }
  }

  template <typename Enum, typename NameOf>
  Enum named(std::string_view text, int count, NameOf name_of, std::string_view what) const {
    for (int i = 0; i < count; ++i) {
      if (text == name_of(static_cast<Enum>(i))) return static_cast<Enum>(i);
    }
    fail("unknown " + std::string(what) + " '" + std::string(text.substr(0, 40)) + "'");
  }

 private:
  std::string_view source_;
  size_t line_number_;
  std::string_view rest_;
};

DType parse_dtype(const LineParser& p, std::string_view text) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    if (text == dtype_name(dtype)) return dtype;
  }
  p.fail("dtype '" + std::string(text.substr(0, 40)) + "' is not a floating dtype cuDNN convolves");
}

bool parse_flag(const LineParser& p, std::string_view text, std::string_view what) {
  return p.integer(text, 0, 1, what) == 1;
}

ConvAlgorithm parse_algorithm(const LineParser& p, std::string_view text) {
  std::string_view parts[4];
  for (int i = 0; i < 4; ++i) {
    const size_t colon = text.find(':');
    if ((colon == std::string_view::npos) != (i == 3)) p.fail("an algorithm is not algo:math:workspace:deterministic");
    parts[i] = text.substr(0, colon);
    text = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  }
  constexpr int64_t kMaxWorkspace = int64_t{1} << 50;  // far beyond any GPU
  // Any int parses; whether cuDNN defines it for the pass is a rule (Note [Usable algorithms]).
  return {.algo = static_cast<int>(p.integer(parts[0], INT32_MIN, INT32_MAX, "algorithm")),
          .math = p.named<ConvMath>(parts[1], 4, conv_math_name, "math type"),
          .workspace_bytes = static_cast<size_t>(p.integer(parts[2], 0, kMaxWorkspace, "workspace")),
          .deterministic = parse_flag(p, parts[3], "deterministic")};
}

std::vector<ConvAlgorithm> parse_algorithms(const LineParser& p, std::string_view text) {
  constexpr size_t kMaxAlgorithms = 64;
  std::vector<ConvAlgorithm> ranking;
  while (true) {
    if (ranking.size() == kMaxAlgorithms) p.fail("more than 64 algorithms in one entry");
    const size_t comma = text.find(',');
    ranking.push_back(parse_algorithm(p, text.substr(0, comma)));
    if (comma == std::string_view::npos) return ranking;
    text = text.substr(comma + 1);
  }
}

std::pair<ConvKey, ConvAlgorithmCache::Entry> parse_entry(LineParser& p) {
  constexpr int64_t kMaxSize = int64_t{1} << 40;
  ConvKey key;
  key.pass = p.named<ConvPass>(p.field("pass"), kNumConvPasses, conv_pass_name, "pass");
  key.device = static_cast<int>(p.integer(p.field("device"), 0, 1023, "device"));
  key.dtype = parse_dtype(p, p.field("dtype"));
  key.math = p.named<ConvMath>(p.field("math"), 4, conv_math_name, "math type");
  key.deterministic = parse_flag(p, p.field("deterministic"), "deterministic");
  key.groups = p.integer(p.field("groups"), 1, kMaxSize, "groups");
  key.input_sizes = p.list("input", 0, kMaxSize);
  key.input_strides = p.list("input_strides", 0, kMaxSize);
  key.weight_sizes = p.list("weight", 0, kMaxSize);
  const std::string_view filter = p.field("filter");
  if (filter != "nchw" && filter != "nhwc")
    p.fail("filter must be nchw or nhwc, got '" + std::string(filter) + "'");
  key.channels_last_filter = filter == "nhwc";
  key.stride = p.list("stride", 1, kMaxSize);
  key.padding = p.list("padding", 0, kMaxSize);
  key.dilation = p.list("dilation", 1, kMaxSize);
  const size_t rank = key.input_sizes.size();
  const size_t spatial = key.stride.size();
  if (rank < 3 || key.input_strides.size() != rank || key.weight_sizes.size() != rank || spatial != rank - 2 ||
      key.padding.size() != spatial || key.dilation.size() != spatial) {
    p.fail("the sizes, strides, weight, stride, padding and dilation disagree on the number of dims");
  }
  ConvAlgorithmCache::Entry entry;
  entry.searched = parse_flag(p, p.field("searched"), "searched");
  entry.ranking = parse_algorithms(p, p.field("algos"));
  p.expect_end();
  return {std::move(key), std::move(entry)};
}

// A file of `bytes` bytes is too large to be an algorithm cache (checked of a file before
// it is read, and of bytes given in memory).
void check_size(std::string_view source, uintmax_t bytes) {
  KILN_CHECK(bytes <= static_cast<uintmax_t>(kMaxAlgorithmFileBytes), "load_algorithm_cache: ", source, " is ", bytes,
             " bytes, more than any algorithm cache (the limit is ", kMaxAlgorithmFileBytes, "): not such a file");
}

// The whole file, its size checked before it is read.
std::string read_file(const std::string& path) {
  std::error_code error;
  const auto bytes = std::filesystem::file_size(path, error);
  KILN_CHECK(!error, "load_algorithm_cache: cannot read ", path, ": ", error.message());
  check_size(path, bytes);
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in, "load_algorithm_cache: cannot open ", path);
  std::string text(static_cast<size_t>(bytes), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  KILN_CHECK(in.gcount() == static_cast<std::streamsize>(text.size()), "load_algorithm_cache: cannot read ", path,
             " (it changed while being read?)");
  return text;
}

// The lines of a whole file, which must end with a newline.
std::vector<std::string_view> split_lines(std::string_view text, std::string_view source) {
  check_size(source, text.size());
  KILN_CHECK(!text.empty(), "load_algorithm_cache: ", source, " is empty, not an algorithm cache");
  KILN_CHECK(text.back() == '\n', "load_algorithm_cache: ", source,
             " is truncated: its last line has no end (was the write interrupted?)");
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string_view header_value(std::string_view source, const std::vector<std::string_view>& lines, size_t index,
                              std::string_view name) {
  const LineParser p(source, index + 1, {});
  if (index >= lines.size()) p.fail("the file is truncated: the header line '" + std::string(name) + " ...' is missing");
  const std::string_view line = lines[index];
  if (line.size() <= name.size() || line.substr(0, name.size()) != name || line[name.size()] != ' ') {
    p.fail("expected the header line '" + std::string(name) + " ...', found '" + std::string(line.substr(0, 40)) +
           "'");
  }
  return line.substr(name.size() + 1);
}

struct FileHeader {
  AlgorithmCacheIdentity identity;
  int64_t entries = 0;
};

FileHeader parse_header(std::string_view source, const std::vector<std::string_view>& lines) {
  const std::string_view version = header_value(source, lines, 0, kMagic);
  const LineParser first(source, 1, {});
  if (first.integer(version, 0, INT32_MAX, "format version") != kFormatVersion) {
    first.fail("format version " + std::string(version) + ", but this Kiln reads version " +
               std::to_string(kFormatVersion));
  }
  FileHeader header;
  header.identity.gpu = std::string(header_value(source, lines, 1, "gpu"));
  header.identity.cudnn_version =
      LineParser(source, 3, {}).integer(header_value(source, lines, 2, "cudnn"), 0, INT64_MAX, "cuDNN version");
  header.entries =
      LineParser(source, 4, {}).integer(header_value(source, lines, 3, "entries"), 0, INT64_MAX, "entry count");
  return header;
}

// Why the algorithm rules refuse `entry` of line `line_number` ("" when they accept it),
// and the entry as the cache keeps it (each algorithm as it runs): the same
// usable_ranking a search's ranking passes through (Note [Usable algorithms]).
std::string refuse_or_keep(std::string_view source, size_t line_number, const ConvKey& key,
                           ConvAlgorithmCache::Entry& entry) {
  std::vector<RefusedAlgorithm> refused;
  std::vector<ConvAlgorithm> kept = usable_ranking(key, entry.ranking, SIZE_MAX, &refused);
  if (refused.empty()) {
    entry.ranking = std::move(kept);
    return "";
  }
  std::ostringstream why;
  why << source << ":" << line_number << ": left out the " << conv_pass_name(key.pass) << " entry ("
      << dtype_name(key.dtype) << ", math " << conv_math_name(key.math)
      << (key.deterministic ? ", deterministic" : "") << "): ";
  for (size_t i = 0; i < refused.size(); ++i) {
    why << (i ? "; " : "") << "algorithm " << refused[i].algorithm.algo << " ("
        << conv_math_name(refused[i].algorithm.math) << ") is " << refused[i].why;
  }
  return why.str();
}

std::string load_message(int64_t loaded, std::string_view source, const std::vector<std::string>& dropped) {
  std::string message = "loaded " + std::to_string(loaded) + " algorithm choices from " + std::string(source);
  if (!dropped.empty()) {
    message += "; left out " + std::to_string(dropped.size()) +
               " that the algorithm rules refuse (the first: " + dropped.front() + ")";
  }
  return message;
}

}  // namespace

cudnn::SaveReport write_algorithm_file(const std::vector<std::pair<ConvKey, ConvAlgorithmCache::Entry>>& entries,
                                       const std::string& path, const AlgorithmCacheIdentity& identity) {
  KILN_CHECK(identity.gpu.find('\n') == std::string::npos, "save_algorithm_cache: a GPU name with a newline");
  const SaveStatus status = save_atomically(file_text(identity, entries), path, "save_algorithm_cache");
  const int64_t count = static_cast<int64_t>(entries.size());
  std::string message = "saved " + std::to_string(count) + " algorithm choices to " + path;
  if (!status.durable) message += "; " + status.warning;
  return {.entries = count, .durable = status.durable, .message = std::move(message)};
}

cudnn::LoadReport read_algorithm_file(ConvAlgorithmCache& cache, const std::string& path,
                                      const AlgorithmCacheIdentity& identity) {
  return read_algorithm_bytes(cache, read_file(path), identity, path);
}

cudnn::LoadReport read_algorithm_bytes(ConvAlgorithmCache& cache, std::string_view bytes,
                                       const AlgorithmCacheIdentity& identity, std::string_view source) {
  const std::vector<std::string_view> lines = split_lines(bytes, source);
  const FileHeader header = parse_header(source, lines);
  const AlgorithmCacheIdentity& found = header.identity;
  if (!(found == identity)) {
    return {.loaded = false, .entries = 0, .dropped = {},
            .message = std::string(source) + " was written for GPU '" + found.gpu + "' with cuDNN " +
                       std::to_string(found.cudnn_version) + ", but this process has GPU '" + identity.gpu +
                       "' with cuDNN " + std::to_string(identity.cudnn_version) + ": nothing loaded"};
  }
  const int64_t count = header.entries;
  const int64_t present = static_cast<int64_t>(lines.size()) - kHeaderLines;
  KILN_CHECK(present >= count, "load_algorithm_cache: ", source, " is truncated: the header promises ", count,
             " entries but only ", present, " follow");
  KILN_CHECK(present == count, "load_algorithm_cache: ", source, ": ", present - count,
             " lines after the ", count, " entries the header promises");
  std::vector<std::pair<ConvKey, ConvAlgorithmCache::Entry>> kept;
  std::vector<std::string> dropped;
  for (size_t i = kHeaderLines; i < lines.size(); ++i) {
    LineParser p(source, i + 1, lines[i]);
    auto [key, entry] = parse_entry(p);
    std::string why = refuse_or_keep(source, i + 1, key, entry);
    if (why.empty()) {
      kept.emplace_back(std::move(key), std::move(entry));
    } else {
      dropped.push_back(std::move(why));
    }
  }
  // Only a file that parsed completely is added: a bad line leaves the cache as it was.
  for (auto& [key, entry] : kept) cache.insert(key, std::move(entry));
  const int64_t loaded = static_cast<int64_t>(kept.size());
  std::string message = load_message(loaded, source, dropped);
  return {.loaded = true, .entries = loaded, .dropped = std::move(dropped), .message = std::move(message)};
}

}  // namespace kiln::cuda
