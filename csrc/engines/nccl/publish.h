// How a group's decisions reach NCCL: its decision channel in our tuner plugin
// (nccl_plugin/dynamiccl_nccl.h). The group publishes each call's action right before issuing
// it; NCCL's getCollInfo for the group's communicator, bound to the channel when NCCL created
// it, reads it on whatever thread NCCL runs it; the group reads back what the plugin did.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/types.h"

namespace dynamiccl {

class NcclChannel {
 public:
  NcclChannel() = default;
  explicit NcclChannel(int id) : id_(id) {}
  int id() const { return id_; }
  bool open() const { return id_ != 0; }

  // Communicators of `n_ranks` ranks NCCL creates until expect_done() bind to this channel.
  void expect_comm(size_t n_ranks) const;
  void expect_done() const;
  // Communicators bound to it so far.
  int comms_bound() const;

  // The action for the NCCL call the group issues next (default action: clears).
  void publish(OpKind op, uint64_t effective_bytes, const Action& action) const;
  // NCCL's own choice, published so that the outcome tells whether NCCL consulted the plugin on
  // this channel for the call (delivered()).
  void publish_nccl_choice(OpKind op, uint64_t effective_bytes) const;
  void clear() const;
  // What the plugin did with the last call: applied the published decision (delivered: it
  // matched the call), or matched but NCCL could not apply the arm.
  bool delivered() const;
  bool last_unavailable() const;
  // The channels NCCL settled on for the last call, of `op` and `effective_bytes`, since the last
  // publish (NCCL >= 2.30 says so to the tuner); 0 when it did not say.
  int last_channels(OpKind op, uint64_t effective_bytes) const;

  static int open_new();  // 0: none left
  static void close(int id);

 private:
  int id_ = 0;
};

// True once NCCL in this process initialised the plugin (a communicator exists).
bool nccl_plugin_loaded();

}  // namespace dynamiccl
