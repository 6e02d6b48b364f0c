// NCCL's names of collective, algorithm and protocol ids: read back from the profiler's
// Coll events and written into the tuner's log lines.
#ifndef DYNAMICCL_NCCL_NCCL_NAMES_H_
#define DYNAMICCL_NCCL_NCCL_NAMES_H_

namespace dynamiccl {
namespace nccl_plugin {

// The name NCCL_ALGO / NCCL_PROTO accept for an id ("AllReduce", "Ring", "Simple");
// "unknown" for an id NCCL does not define.
const char* coll_name(int coll_type);
const char* algo_name(int algo);
const char* proto_name(int proto);

// The id of a name as NCCL's profiler reports it, whose spelling varies between NCCL
// versions ("NVLS_TREE", "NVLSTree"): case and underscores are ignored. -1 when unknown.
int coll_id(const char* name);
int algo_id(const char* name);
int proto_id(const char* name);

}  // namespace nccl_plugin
}  // namespace dynamiccl

#endif  // DYNAMICCL_NCCL_NCCL_NAMES_H_
