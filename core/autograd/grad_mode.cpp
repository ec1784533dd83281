// The thread-local flags behind NoGradGuard, EnableGradGuard and DetectAnomalyGuard.
#include "core/autograd/grad_mode.h"

namespace kiln::autograd {
namespace {
thread_local bool t_grad_mode = true;
thread_local bool t_anomaly_mode = false;
}  // namespace

bool grad_mode_enabled() { return t_grad_mode; }
void set_grad_mode(bool enabled) { t_grad_mode = enabled; }
bool anomaly_mode_enabled() { return t_anomaly_mode; }
void set_anomaly_mode(bool enabled) { t_anomaly_mode = enabled; }

}  // namespace kiln::autograd
