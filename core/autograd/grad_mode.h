// Thread-local switches of autograd: grad mode and anomaly mode.
//
// Grad mode (on by default) decides whether ops record backward nodes. NoGradGuard turns
// it off for a scope (validation, optimizer steps); EnableGradGuard turns it back on
// inside such a scope (activation checkpointing's recompute). Anomaly mode makes the
// engine check every gradient a backward node produces for NaN/Inf and name the forward
// op that made the node; it costs a device sync per node, so it is off by default.
#pragma once

namespace kiln {
namespace autograd {

bool grad_mode_enabled();
void set_grad_mode(bool enabled);
bool anomaly_mode_enabled();
void set_anomaly_mode(bool enabled);

}  // namespace autograd

class NoGradGuard {
 public:
  NoGradGuard() : previous_(autograd::grad_mode_enabled()) { autograd::set_grad_mode(false); }
  ~NoGradGuard() { autograd::set_grad_mode(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(autograd::grad_mode_enabled()) { autograd::set_grad_mode(true); }
  ~EnableGradGuard() { autograd::set_grad_mode(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : previous_(autograd::anomaly_mode_enabled()) {
    autograd::set_anomaly_mode(true);
  }
  ~DetectAnomalyGuard() { autograd::set_anomaly_mode(previous_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace kiln
