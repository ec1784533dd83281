// Where this process stands in a distributed job: its rank, the world size, its place on
// its machine, and the address of rank 0's store. init_process_group resolves it from, in
// this order:
//   1. explicit arguments (RendezvousOptions);
//   2. torchrun's and `kiln launch`'s variables: RANK, WORLD_SIZE, LOCAL_RANK,
//      LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
//   3. SLURM's (srun): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, the tasks
//      per node, and the first host of SLURM_JOB_NODELIST as the master;
//   4. Open MPI's (mpirun): OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE.
// The first source that names a rank supplies everything an explicit argument does not;
// MASTER_ADDR and MASTER_PORT, when set, always override a source's guess. A variable
// that is missing, not a number, or contradicts another (a rank outside the world) is a
// kiln::Error naming it.
//
//   RendezvousInfo where = resolve_rendezvous(RendezvousOptions{.rank = 0, .world_size = 1});
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace kiln::dist {

struct RendezvousOptions {
  std::optional<int64_t> rank = std::nullopt;
  std::optional<int64_t> world_size = std::nullopt;
  std::optional<std::string> master_addr = std::nullopt;
  std::optional<uint16_t> master_port = std::nullopt;
};

struct RendezvousInfo {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;        // the rank among the processes of this machine
  int64_t local_world_size = 1;  // the processes on this machine
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 29500;  // torchrun's default
  std::string source;            // "arguments", "torchrun", "SLURM" or "Open MPI", for messages
};

// Reads one environment variable (absent: nullopt); tests pass their own.
using Environment = std::function<std::optional<std::string>(const std::string& name)>;
Environment process_environment();

RendezvousInfo resolve_rendezvous(const RendezvousOptions& options, const Environment& environment);
RendezvousInfo resolve_rendezvous(const RendezvousOptions& options = {});

// The first host of a SLURM host list: "node[07-09,12],gpu1" -> "node07".
std::string first_slurm_host(const std::string& node_list);
// The tasks on node `node` from SLURM_TASKS_PER_NODE's run-length form: "4(x2),2" has
// 4, 4 and 2 tasks on nodes 0, 1 and 2.
int64_t slurm_tasks_on_node(const std::string& tasks_per_node, int64_t node);

}  // namespace kiln::dist
