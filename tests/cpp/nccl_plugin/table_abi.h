// One driver for the cost-table tuner ABIs (v3..v7), calling them the way the NCCL generation
// that uses each one does.
#ifndef DYNAMICCL_TESTS_NCCL_PLUGIN_TABLE_ABI_H_
#define DYNAMICCL_TESTS_NCCL_PLUGIN_TABLE_ABI_H_

#include <ostream>

#include "plugin_under_test.h"

namespace dynamiccl {
namespace testing {

struct TableAbi {
  int version;   // tuner ABI: 3, 4, 5, 6, 7
  int num_algo;  // NCCL 2.22 passes 6 algorithms, 2.23 and later 7

  void* init(size_t n_ranks = 8, size_t n_nodes = 1, uint64_t comm_id = 0x5eed,
             ncclDebugLogger_t logger = nullptr) const {
    const PluginUnderTest& p = PluginUnderTest::get();
    void* ctx = nullptr;
    ncclResult_t rc = ncclInternalError;
    switch (version) {
      case 3: rc = p.v3()->init(n_ranks, n_nodes, logger, &ctx); break;
      case 4: rc = p.v4()->init(n_ranks, n_nodes, logger, &ctx); break;
      case 5: rc = p.v5()->init(&ctx, comm_id, n_ranks, n_nodes, logger, nullptr, nullptr); break;
      case 6: rc = p.v6()->init(&ctx, comm_id, n_ranks, n_nodes, logger, nullptr, nullptr); break;
      case 7: rc = p.v7()->init(&ctx, comm_id, n_ranks, n_nodes, logger, nullptr, nullptr); break;
    }
    EXPECT_EQ(rc, ncclSuccess);
    return ctx;
  }

  ncclResult_t get(void* ctx, int coll, size_t bytes, int pipe_ops, CostTable& t,
                   int* n_channels) const {
    const PluginUnderTest& p = PluginUnderTest::get();
    const auto f = static_cast<ncclFunc_t>(coll);
    const int np = CostTable::kProto;
    switch (version) {
      case 3:
        return p.v3()->getCollInfo(ctx, f, bytes, pipe_ops, t.arg(), num_algo, np, n_channels);
      case 4:
        return p.v4()->getCollInfo(ctx, f, bytes, pipe_ops, t.arg(), num_algo, np, 0, n_channels);
      case 5:
        return p.v5()->getCollInfo(ctx, f, bytes, pipe_ops, t.arg(), num_algo, np, 1, n_channels);
      case 6:
        return p.v6()->getCollInfo(ctx, f, bytes, pipe_ops, t.arg(), num_algo, np, 0, n_channels);
      case 7:
        return p.v7()->getCollInfo(ctx, f, bytes, pipe_ops, t.arg(), num_algo, np, 0, n_channels);
    }
    return ncclInternalError;
  }

  ncclResult_t fini(void* ctx) const {
    const PluginUnderTest& p = PluginUnderTest::get();
    switch (version) {
      case 3: return p.v3()->destroy(ctx);
      case 4: return p.v4()->destroy(ctx);
      case 5: return p.v5()->finalize(ctx);
      case 6: return p.v6()->finalize(ctx);
      case 7: return p.v7()->finalize(ctx);
    }
    return ncclInternalError;
  }
};

inline std::ostream& operator<<(std::ostream& os, const TableAbi& abi) {
  return os << "v" << abi.version << "_" << abi.num_algo << "algos";
}

inline const TableAbi kTableAbis[] = {{3, 6}, {3, 7}, {4, 7}, {5, 7}, {6, 7}, {7, 7}};

}  // namespace testing
}  // namespace dynamiccl

#endif  // DYNAMICCL_TESTS_NCCL_PLUGIN_TABLE_ABI_H_
