// zt-bench entry point: dispatches to the registered benchmark subcommands.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>

#include "apps/bench/bench.h"

namespace zt::bench {

namespace {
struct Entry {
  const char* help;
  BenchFn fn;
};
std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  return r;
}
}  // namespace

Registrar::Registrar(const char* name, const char* help, BenchFn fn) {
  registry()[name] = {help, fn};
}

void sync(const Tensor& t) {
  if (t.defined() && t.is_cuda()) (void)t.detach().reshape({-1}).narrow(0, 0, 1).item();
}

double time_per_call(const std::function<void()>& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace zt::bench

int main(int argc, char** argv) {
  auto& reg = zt::bench::registry();
  if (argc < 2 || reg.find(argv[1]) == reg.end()) {
    std::fprintf(stderr, "usage: zt-bench <benchmark> [args]\nbenchmarks:\n");
    for (auto& [name, e] : reg) std::fprintf(stderr, "  %-8s %s\n", name.c_str(), e.help);
    return argc < 2 ? 2 : 1;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return reg[argv[1]].fn(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt-bench %s: %s\n", argv[1], e.what());
    return 1;
  }
}
