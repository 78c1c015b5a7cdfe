#include "swisk/registry.h"

namespace swisk {

static const char* kBackendNames[kNumBackends] = {"cpu", "cuda", "mps", "cuda-emu", "metal-emu"};

const char* backend_name(Backend b) { return kBackendNames[int(b)]; }

Backend backend_from_name(const std::string& name) {
  for (int i = 0; i < kNumBackends; ++i)
    if (name == kBackendNames[i]) return Backend(i);
  if (name == "metal") return Backend::metal;
  fail(ErrorKind::value, "swisk", "backend", "unknown backend '", name, "' (cpu, cuda, mps, cuda-emu, metal-emu)");
}

Device backend_device(Backend b) {
  switch (b) {
    case Backend::cuda: return Device::cuda;
    case Backend::metal: return Device::mps;
    default: return Device::cpu;  // the CPU backend and both emulators work on host memory
  }
}

void Registry::add_erased(const char* op, Backend b, const void* tag, void (*fn)(), void (*supports)()) {
  for (auto& e : entries_)
    if (e.op == op && e.backend == b) {
      e = Entry{op, b, tag, fn, supports};
      return;
    }
  entries_.push_back(Entry{op, b, tag, fn, supports});
}

const Registry::Entry& Registry::find(const char* op, Backend b, const void* tag) const {
  for (const auto& e : entries_) {
    if (e.op != op || e.backend != b) continue;
    if (e.tag != tag) fail(ErrorKind::runtime, op, "dispatch", "kernel registered with other argument types");
    return e;
  }
  fail(ErrorKind::value, op, "device", "no kernel for backend '", backend_name(b), "' in this build");
}

bool Registry::has(const std::string& op, Backend b) const {
  for (const auto& e : entries_)
    if (e.op == op && e.backend == b) return true;
  return false;
}

std::vector<std::string> Registry::ops() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) {
    bool seen = false;
    for (const auto& o : out) seen = seen || o == e.op;
    if (!seen) out.push_back(e.op);
  }
  return out;
}

Registry& registry() {
  static Registry r = [] {
    Registry reg;
    register_cpu_backend(reg);
    register_cuda_backend(reg);
    register_cuda_emu_backend(reg);
    register_metal_backend(reg);
    register_metal_emu_backend(reg);
    return reg;
  }();
  return r;
}

}  // namespace swisk
