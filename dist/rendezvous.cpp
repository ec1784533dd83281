// Resolving rank, world and master from arguments and launcher variables (rendezvous.h):
// a source is a table of variable names; the first whose rank variable is set fills in
// what the arguments left open, then the whole is checked for consistency.
#include "dist/rendezvous.h"

#include <charconv>
#include <cstdlib>

#include "core/error.h"

namespace kiln::dist {
namespace {

// One launcher's variable names; empty where it has none.
struct Source {
  const char* name;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

constexpr Source kTorchrun{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
constexpr Source kSlurm{"SLURM", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", ""};
constexpr Source kOpenMpi{"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};

int64_t parse_integer(const std::string& text, const std::string& what) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  KILN_CHECK(ec == std::errc() && end == text.data() + text.size() && !text.empty(),
             "init_process_group: ", what, " is '", text, "', not an integer");
  return value;
}

// The variable's value as an integer, or nullopt when unset.
std::optional<int64_t> integer_variable(const Environment& environment, const char* name) {
  if (name == nullptr || *name == '\0') return std::nullopt;
  const std::optional<std::string> text = environment(name);
  if (!text) return std::nullopt;
  return parse_integer(*text, name);
}

int64_t required_variable(const Environment& environment, const Source& source, const char* name) {
  const std::optional<int64_t> value = integer_variable(environment, name);
  KILN_CHECK(value.has_value(), "init_process_group: ", source.rank, " is set (", source.name, ") but ", name,
             " is not");
  return *value;
}

const Source* detect_source(const Environment& environment) {
  for (const Source* source : {&kTorchrun, &kSlurm, &kOpenMpi})
    if (environment(source->rank)) return source;
  return nullptr;
}

void fill_from(const Source& source, const Environment& environment, RendezvousInfo& info,
               const RendezvousOptions& options) {
  info.source = source.name;
  if (!options.rank) info.rank = required_variable(environment, source, source.rank);
  if (!options.world_size) info.world_size = required_variable(environment, source, source.world_size);
  info.local_rank = integer_variable(environment, source.local_rank).value_or(info.rank);
  if (const auto local_size = integer_variable(environment, source.local_world_size)) {
    info.local_world_size = *local_size;
  } else if (&source == &kSlurm) {
    if (const auto per_node = integer_variable(environment, "SLURM_NTASKS_PER_NODE")) {
      info.local_world_size = *per_node;
    } else if (const auto list = environment("SLURM_TASKS_PER_NODE")) {
      info.local_world_size =
          slurm_tasks_on_node(*list, integer_variable(environment, "SLURM_NODEID").value_or(0));
    } else {
      info.local_world_size = info.world_size;
    }
  } else {
    info.local_world_size = info.world_size;
  }
  if (&source == &kSlurm) {
    std::optional<std::string> nodes = environment("SLURM_JOB_NODELIST");
    if (!nodes) nodes = environment("SLURM_NODELIST");
    if (nodes) info.master_addr = first_slurm_host(*nodes);
  }
}

void check_consistent(const RendezvousInfo& info) {
  const std::string from = " (from " + info.source + ")";
  KILN_CHECK(info.world_size >= 1, "init_process_group: the world size is ", info.world_size, from,
             "; it must be at least 1");
  KILN_CHECK(info.rank >= 0 && info.rank < info.world_size, "init_process_group: rank ", info.rank,
             " is outside a world of ", info.world_size, from);
  KILN_CHECK(info.local_world_size >= 1 && info.local_world_size <= info.world_size,
             "init_process_group: the local world size ", info.local_world_size, " is outside 1..",
             info.world_size, from);
  KILN_CHECK(info.local_rank >= 0 && info.local_rank < info.local_world_size,
             "init_process_group: local rank ", info.local_rank, " is outside the ", info.local_world_size,
             " processes of this machine", from);
}

}  // namespace

Environment process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

RendezvousInfo resolve_rendezvous(const RendezvousOptions& options, const Environment& environment) {
  RendezvousInfo info;
  info.source = "arguments";
  if (options.rank) info.rank = *options.rank;
  if (options.world_size) info.world_size = *options.world_size;
  const bool explicit_world = options.rank && options.world_size;
  const Source* source = explicit_world ? nullptr : detect_source(environment);
  if (source != nullptr) {
    fill_from(*source, environment, info, options);
  } else if (!explicit_world) {
    KILN_CHECK(!options.rank && !options.world_size, "init_process_group: ",
               options.rank ? "a rank was given but no world size" : "a world size was given but no rank",
               ", and no launcher variable (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK) supplies it");
    info.source = "defaults";  // a single process
  } else {
    info.local_rank = info.rank;
    info.local_world_size = info.world_size;
  }
  if (const auto addr = environment("MASTER_ADDR")) info.master_addr = *addr;
  if (const auto port = environment("MASTER_PORT")) {
    const int64_t value = parse_integer(*port, "MASTER_PORT");
    KILN_CHECK(value > 0 && value < 65536, "init_process_group: MASTER_PORT ", value, " is not a TCP port");
    info.master_port = static_cast<uint16_t>(value);
  }
  if (options.master_addr) info.master_addr = *options.master_addr;
  if (options.master_port) info.master_port = *options.master_port;
  KILN_CHECK(!info.master_addr.empty(), "init_process_group: the master address is empty");
  const bool master_known = options.master_addr || environment("MASTER_ADDR") || info.source == "SLURM";
  KILN_CHECK(master_known || info.world_size == 1 || info.source == "arguments",
             "init_process_group: ", info.source, " gives ", info.world_size,
             " ranks but not the host of rank 0: set MASTER_ADDR (and MASTER_PORT), e.g. "
             "mpirun -x MASTER_ADDR=<host of rank 0> ...");
  check_consistent(info);
  return info;
}

RendezvousInfo resolve_rendezvous(const RendezvousOptions& options) {
  return resolve_rendezvous(options, process_environment());
}

std::string first_slurm_host(const std::string& node_list) {
  std::string host;
  int depth = 0;
  bool in_first_range = false;  // inside brackets, before the first ',' or '-'
  for (const char c : node_list) {
    if (c == ',' && depth == 0) break;
    if (c == '[') {
      KILN_CHECK(depth == 0, "init_process_group: nested brackets in the SLURM host list '", node_list, "'");
      depth = 1;
      in_first_range = true;
    } else if (c == ']') {
      KILN_CHECK(depth == 1, "init_process_group: an unmatched ']' in the SLURM host list '", node_list, "'");
      depth = 0;
    } else if (depth == 1) {
      if (c == ',' || c == '-') in_first_range = false;
      if (in_first_range) host.push_back(c);
    } else {
      host.push_back(c);
    }
  }
  KILN_CHECK(depth == 0, "init_process_group: an unclosed '[' in the SLURM host list '", node_list, "'");
  KILN_CHECK(!host.empty(), "init_process_group: the SLURM host list '", node_list, "' names no host");
  return host;
}

int64_t slurm_tasks_on_node(const std::string& tasks_per_node, int64_t node) {
  const std::string what = "SLURM_TASKS_PER_NODE";
  int64_t first_node = 0;
  size_t at = 0;
  while (at < tasks_per_node.size()) {
    size_t end = tasks_per_node.find(',', at);
    if (end == std::string::npos) end = tasks_per_node.size();
    const std::string item = tasks_per_node.substr(at, end - at);  // "4" or "4(x2)"
    const size_t paren = item.find("(x");
    const int64_t tasks = parse_integer(item.substr(0, paren), what);
    int64_t repeat = 1;
    if (paren != std::string::npos) {
      KILN_CHECK(item.back() == ')', "init_process_group: ", what, " has a malformed item '", item, "'");
      repeat = parse_integer(item.substr(paren + 2, item.size() - paren - 3), what);
    }
    KILN_CHECK(tasks >= 1 && repeat >= 1, "init_process_group: ", what, " has a malformed item '", item, "'");
    if (node < first_node + repeat) return tasks;
    first_node += repeat;
    at = end + 1;
  }
  KILN_CHECK(false, "init_process_group: ", what, " '", tasks_per_node, "' lists ", first_node,
             " nodes, but this is node ", node);
  return 0;
}

}  // namespace kiln::dist
