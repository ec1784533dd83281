// resolve_rendezvous (dist/rendezvous.h): explicit arguments over torchrun's variables
// over SLURM's over Open MPI's; MASTER_ADDR/MASTER_PORT overriding; SLURM host lists and
// tasks-per-node strings; and every missing, malformed or contradictory variable an error
// that names it.
#include <gtest/gtest.h>

#include <map>

#include "dist/rendezvous.h"
#include "tests/test_util.h"

namespace kiln {
namespace {

using dist::RendezvousInfo;
using dist::RendezvousOptions;
using dist::resolve_rendezvous;

dist::Environment environment(std::map<std::string, std::string> variables) {
  return [variables](const std::string& name) -> std::optional<std::string> {
    const auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  };
}

TEST(Rendezvous, NothingSetIsOneProcess) {
  const RendezvousInfo info = resolve_rendezvous({}, environment({}));
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.master_port, 29500);
}

TEST(Rendezvous, TorchrunVariables) {
  const RendezvousInfo info = resolve_rendezvous({}, environment({{"RANK", "5"},
                                                                  {"WORLD_SIZE", "8"},
                                                                  {"LOCAL_RANK", "1"},
                                                                  {"LOCAL_WORLD_SIZE", "4"},
                                                                  {"MASTER_ADDR", "node7"},
                                                                  {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(info.source, "torchrun");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_EQ(info.master_addr, "node7");
  EXPECT_EQ(info.master_port, 1234);
}

TEST(Rendezvous, ExplicitArgumentsWinOverVariables) {
  const RendezvousInfo info =
      resolve_rendezvous({.rank = 1, .world_size = 2, .master_addr = "10.0.0.1", .master_port = 4000},
                         environment({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"MASTER_ADDR", "node7"}}));
  EXPECT_EQ(info.source, "arguments");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 2);
  EXPECT_EQ(info.master_addr, "10.0.0.1");
  EXPECT_EQ(info.master_port, 4000);
  // A rank alone takes the world size from the launcher.
  const RendezvousInfo mixed = resolve_rendezvous(
      {.rank = 3},
      environment({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}));
  EXPECT_EQ(mixed.rank, 3);
  EXPECT_EQ(mixed.world_size, 8);
}

TEST(Rendezvous, SlurmVariablesAndItsHostList) {
  const RendezvousInfo info =
      resolve_rendezvous({}, environment({{"SLURM_PROCID", "6"},
                                          {"SLURM_NTASKS", "8"},
                                          {"SLURM_LOCALID", "2"},
                                          {"SLURM_NODEID", "1"},
                                          {"SLURM_TASKS_PER_NODE", "4(x2)"},
                                          {"SLURM_JOB_NODELIST", "gpu[003-004,010],login1"}}));
  EXPECT_EQ(info.source, "SLURM");
  EXPECT_EQ(info.rank, 6);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 2);
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_EQ(info.master_addr, "gpu003");
  EXPECT_EQ(info.master_port, 29500);
  // torchrun's variables come first: `srun kiln launch ...` gives its ranks both sets.
  const RendezvousInfo launched = resolve_rendezvous({}, environment({{"SLURM_PROCID", "1"},
                                                                      {"SLURM_NTASKS", "2"},
                                                                      {"RANK", "3"},
                                                                      {"WORLD_SIZE", "4"},
                                                                      {"MASTER_ADDR", "a"},
                                                                      {"MASTER_PORT", "5"}}));
  EXPECT_EQ(launched.source, "torchrun");
  EXPECT_EQ(launched.rank, 3);
}

TEST(Rendezvous, SlurmHostListsAndTasksPerNode) {
  EXPECT_EQ(dist::first_slurm_host("node1"), "node1");
  EXPECT_EQ(dist::first_slurm_host("node1,node2"), "node1");
  EXPECT_EQ(dist::first_slurm_host("node[07-09,12],gpu1"), "node07");
  EXPECT_EQ(dist::first_slurm_host("rack[2,4]-n[10-11]"), "rack2-n10");
  EXPECT_KILN_ERROR(dist::first_slurm_host("node[1-2"), "an unclosed '['", "node[1-2");
  EXPECT_KILN_ERROR(dist::first_slurm_host("node1-2]"), "an unmatched ']'");
  EXPECT_KILN_ERROR(dist::first_slurm_host(""), "names no host");
  EXPECT_EQ(dist::slurm_tasks_on_node("4(x2),2", 0), 4);
  EXPECT_EQ(dist::slurm_tasks_on_node("4(x2),2", 1), 4);
  EXPECT_EQ(dist::slurm_tasks_on_node("4(x2),2", 2), 2);
  EXPECT_KILN_ERROR(dist::slurm_tasks_on_node("4(x2),2", 3), "lists 3 nodes, but this is node 3");
  EXPECT_KILN_ERROR(dist::slurm_tasks_on_node("4(x2", 0), "malformed item '4(x2'");
  EXPECT_KILN_ERROR(dist::slurm_tasks_on_node("x", 0), "SLURM_TASKS_PER_NODE is 'x', not an integer");
}

TEST(Rendezvous, OpenMpiVariablesNeedTheMasterAddress) {
  const std::map<std::string, std::string> mpi = {{"OMPI_COMM_WORLD_RANK", "2"},
                                                  {"OMPI_COMM_WORLD_SIZE", "4"},
                                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  EXPECT_KILN_ERROR(resolve_rendezvous({}, environment(mpi)),
                    "Open MPI gives 4 ranks but not the host of rank 0", "set MASTER_ADDR");
  auto with_master = mpi;
  with_master["MASTER_ADDR"] = "head";
  const RendezvousInfo info = resolve_rendezvous({}, environment(with_master));
  EXPECT_EQ(info.source, "Open MPI");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.master_addr, "head");
}

TEST(Rendezvous, MissingMalformedAndContradictoryVariablesAreNamed) {
  EXPECT_KILN_ERROR(resolve_rendezvous({}, environment({{"RANK", "0"}})),
                    "RANK is set (torchrun) but WORLD_SIZE is not");
  EXPECT_KILN_ERROR(resolve_rendezvous({}, environment({{"RANK", "zero"}, {"WORLD_SIZE", "2"}})),
                    "RANK is 'zero', not an integer");
  EXPECT_KILN_ERROR(
      resolve_rendezvous({}, environment({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}})),
      "rank 2 is outside a world of 2 (from torchrun)");
  EXPECT_KILN_ERROR(resolve_rendezvous({}, environment({{"RANK", "0"},
                                                        {"WORLD_SIZE", "2"},
                                                        {"LOCAL_RANK", "3"},
                                                        {"LOCAL_WORLD_SIZE", "2"},
                                                        {"MASTER_ADDR", "h"}})),
                    "local rank 3 is outside the 2 processes of this machine");
  EXPECT_KILN_ERROR(resolve_rendezvous({}, environment({{"MASTER_PORT", "70000"}})),
                    "MASTER_PORT 70000 is not a TCP port");
  EXPECT_KILN_ERROR(resolve_rendezvous({}, environment({{"SLURM_PROCID", "0"}})),
                    "SLURM_PROCID is set (SLURM) but SLURM_NTASKS is not");
  EXPECT_KILN_ERROR(resolve_rendezvous({.rank = 0}, environment({})), "a rank was given but no world size");
  EXPECT_KILN_ERROR(resolve_rendezvous({.rank = 0, .world_size = 0}, environment({})), "the world size is 0");
  EXPECT_KILN_ERROR(resolve_rendezvous({.rank = 4, .world_size = 4}, environment({})),
                    "rank 4 is outside a world of 4 (from arguments)");
}

}  // namespace
}  // namespace kiln
