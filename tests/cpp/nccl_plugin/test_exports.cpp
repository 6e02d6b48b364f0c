// The library's dynamic symbol table holds the NCCL plugin symbols and dynamiccl_nccl_*,
// nothing else: internal names must not collide with NCCL's or the application's.
#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "plugin_under_test.h"

namespace dynamiccl {
namespace testing {
namespace {

// Names of the symbols the ELF file defines in its dynamic symbol table (64-bit ELF).
std::vector<std::string> defined_dynamic_symbols(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::vector<std::string> names;
  if (bytes.size() < sizeof(Elf64_Ehdr)) return names;
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) {
    return names;
  }
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes.data() + eh.e_shoff + i * eh.e_shentsize, sizeof sh);
    return sh;
  };
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr dynsym = section(i);
    if (dynsym.sh_type != SHT_DYNSYM) continue;
    const Elf64_Shdr strtab = section(dynsym.sh_link);
    for (size_t off = 0; off + sizeof(Elf64_Sym) <= dynsym.sh_size; off += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, bytes.data() + dynsym.sh_offset + off, sizeof sym);
      const int bind = ELF64_ST_BIND(sym.st_info);
      if (sym.st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK)) continue;
      names.emplace_back(bytes.data() + strtab.sh_offset + sym.st_name);
    }
  }
  return names;
}

using PluginExportsTest = PluginTest;

TEST_F(PluginExportsTest, OnlyPluginSymbolsAndPublicApiAreExported) {
  const std::set<std::string> plugin_symbols = {"ncclTunerPlugin_v2", "ncclTunerPlugin_v3",
                                                "ncclTunerPlugin_v4", "ncclTunerPlugin_v5",
                                                "ncclTunerPlugin_v6", "ncclTunerPlugin_v7",
                                                "ncclProfiler_v5"};
  const std::vector<std::string> names = defined_dynamic_symbols(DYNAMICCL_NCCL_PLUGIN_PATH);
  ASSERT_FALSE(names.empty());
  std::set<std::string> seen_plugin_symbols;
  for (const std::string& name : names) {
    if (plugin_symbols.count(name) != 0) {
      seen_plugin_symbols.insert(name);
    } else if (name.rfind("__odr_asan", 0) == 0) {
      continue;  // AddressSanitizer's own markers, present in sanitizer builds only
    } else {
      EXPECT_EQ(name.rfind("dynamiccl_nccl_", 0), 0u) << "unexpected export: " << name;
    }
  }
  EXPECT_EQ(seen_plugin_symbols, plugin_symbols);
}

TEST_F(PluginExportsTest, PublicApiResolvesThroughDlsym) {
  for (const char* name :
       {"dynamiccl_nccl_channel_open", "dynamiccl_nccl_channel_close", "dynamiccl_nccl_expect_comm",
        "dynamiccl_nccl_comms_bound", "dynamiccl_nccl_publish", "dynamiccl_nccl_publish_chunk",
        "dynamiccl_nccl_clear", "dynamiccl_nccl_last_outcome", "dynamiccl_nccl_last_channels",
        "dynamiccl_nccl_get_counters", "dynamiccl_nccl_loaded_by_nccl",
        "dynamiccl_nccl_profiler_read", "dynamiccl_nccl_profiler_loaded_by_nccl"}) {
    EXPECT_NE(dlsym(plugin().handle(), name), nullptr) << name;
  }
}

// NCCL opens the plugin by the path of the copy the backend already has loaded: the loader
// returns that same object, so both sides share the decision channels.
TEST_F(PluginExportsTest, SecondDlopenOfTheSamePathSharesState) {
  void* again = dlopen(DYNAMICCL_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(again, nullptr) << dlerror();
  EXPECT_EQ(dlsym(again, "dynamiccl_nccl_publish"),
            dlsym(plugin().handle(), "dynamiccl_nccl_publish"));
  using Publish = void (*)(int, int, size_t, int, int, int);
  reinterpret_cast<Publish>(dlsym(again, "dynamiccl_nccl_publish"))(
      plugin().channel(), DYNAMICCL_NCCL_COLL_ALLREDUCE, 64, -1, -1, -1);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_NOT_CALLED);
  void* ctx = nullptr;
  ASSERT_EQ(plugin().v5()->init(&ctx, 1, 2, 1, nullptr, nullptr, nullptr), ncclSuccess);
  float table[7][3] = {};
  int n_channels = 0;
  plugin().v5()->getCollInfo(ctx, ncclFuncAllReduce, 64, 1, reinterpret_cast<float**>(table), 7, 3,
                             0, &n_channels);
  EXPECT_EQ(plugin().last_outcome(), DYNAMICCL_NCCL_APPLIED);
  EXPECT_EQ(plugin().v5()->finalize(ctx), ncclSuccess);
  dlclose(again);
}

}  // namespace
}  // namespace testing
}  // namespace dynamiccl
