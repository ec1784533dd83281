// The reductions a collective can apply across ranks, as torch.distributed.ReduceOp.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln::dist {

enum class ReduceOp : uint8_t { Sum, Avg, Max, Min };

constexpr std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

}  // namespace kiln::dist
