// zt-bench entry point: dispatches to the registered benchmark subcommands. `zt-bench`,
// `zt-bench --help` list them; an unknown name gets the nearest one suggested.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>
#include <utility>

#include "apps/bench/bench.h"
#include "apps/common/app_cli.h"
#include "core/algo_policy.h"
#include "core/api_profile.h"
#include "core/cpu/blas.h"
#include "core/kernel_profile.h"
#include "core/work_counts.h"

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

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "zt-bench: zt's benchmarks; each prints one JSON object per line\n"
               "Usage: zt-bench <benchmark> [OPTIONS]   (zt-bench <benchmark> --help: its "
               "options)\n\nSubcommands:\n");
  for (auto& [name, e] : registry()) std::fprintf(out, "  %-12s %s\n", name.c_str(), e.help);
}
}  // namespace

Registrar::Registrar(const char* name, const char* help, BenchFn fn) {
  registry()[name] = {help, fn};
}

Cli::Cli(const std::string& name) : CLI::App(registry().at(name).help, "zt-bench " + name) {
  option_defaults()->always_capture_default();
}

bool Cli::parse_args(const std::vector<std::string>& args, int* exit_code) {
  zt::app::tidy_defaults(*this);
  std::vector<std::string> rev(args.rbegin(), args.rend());  // CLI11 pops from the back
  try {
    parse(rev);
  } catch (const CLI::ParseError& e) {
    *exit_code = zt::app::exit_status(*this, e);
    if (const std::string hint = zt::app::unknown_option(*this, args);
        *exit_code == zt::app::kUsageError && !hint.empty())
      std::fprintf(stderr, "%s: %s\n", get_name().c_str(), hint.c_str());
    return false;
  }
  if (!tf32_.empty()) {
    set_tf32({.matmul = tf32_ == "all", .conv = tf32_ != "none"});
    set_conv_algo_policy({.benchmark = cudnn_benchmark_ || conv_algo_policy().benchmark,
                          .deterministic = !cudnn_nondeterministic_});
    if (gemm_benchmark_) set_gemm_benchmark(true);
  }
  return true;
}

void Cli::add_gpu_math_options() {
  tf32_ = "conv";
  add_option("--tf32", tf32_, "GPU TF32 policy as train.tf32: conv (default), all or none")
      ->check(CLI::IsMember({"conv", "all", "none"}));
  add_flag("--cudnn-benchmark", cudnn_benchmark_,
           "time cuDNN's convolution algorithms once per shape and keep the fastest, as "
           "train.cudnn_benchmark (default: ZT_CUDNN_BENCHMARK, else off)");
  add_flag("--cudnn-nondeterministic", cudnn_nondeterministic_,
           "let cuDNN algorithms that sum with atomics compete (train.cudnn_deterministic: "
           "false)");
  add_flag("--gemm-benchmark", gemm_benchmark_,
           "time cuBLASLt's GEMM algorithms once per problem and keep the fastest, as "
           "train.gemm_benchmark (default: ZT_GEMM_BENCHMARK, else off)");
}

std::string gpu_math_json() {
  const Tf32Policy t = tf32();
  const ConvAlgoPolicy c = conv_algo_policy();
  return std::string("\"tf32\":\"") + (t.matmul ? "all" : (t.conv ? "conv" : "none")) +
         "\",\"cudnn_benchmark\":" + (c.benchmark ? "true" : "false") +
         ",\"cudnn_deterministic\":" + (c.deterministic ? "true" : "false") +
         ",\"gemm_benchmark\":" + (gemm_benchmark() ? "true" : "false") + ",\"blas\":\"" +
         cpu::use_cpu_blas_kernels() + "\"";
}

void sync(const Tensor& t) {
  if (!t.defined()) return;
  (void)t.data_ptr();  // a released parameter is refused on every device, not first on a GPU
  if (t.is_cuda()) (void)t.detach().reshape({-1}).narrow(0, 0, 1).item();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;  // as Python's statistics.median
}

std::string work_per_call_json(const std::function<void()>& fn) {
  const WorkCounts before = work_counts();
  fn();
  const WorkCounts w = work_counts() - before;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "\"dispatches_per_step\":%lld,\"launches_per_step\":%lld,\"syncs_per_step\":%lld,"
                "\"d2h_per_step\":%lld,\"h2d_per_step\":%lld,\"host_reads_per_step\":%lld,"
                "\"api_calls_per_step\":%lld",
                static_cast<long long>(w.dispatches), static_cast<long long>(w.launches),
                static_cast<long long>(w.syncs), static_cast<long long>(w.d2h_copies),
                static_cast<long long>(w.h2d_copies), static_cast<long long>(w.host_reads),
                static_cast<long long>(w.api_calls));
  return buf;
}

namespace {
// Wall-clock milliseconds of `steps` calls of fn.
double wall_ms_of(int steps, const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::string api_profile_json(const std::string& fields, int steps, const std::function<void()>& fn,
                             size_t shown) {
  ApiProfile profile;
  const double wall_ms = wall_ms_of(steps, fn);
  const std::vector<ApiProfile::Site> sites = profile.sites();
  double ms = 0;
  int64_t calls = 0;
  std::string out;
  char buf[512];
  for (size_t i = 0; i < sites.size(); ++i) {
    const ApiProfile::Site& s = sites[i];
    ms += s.host_ms;
    calls += s.calls;
    if (i >= shown) continue;
    std::snprintf(buf, sizeof buf,
                  "{%s,\"api\":\"%s\",\"at\":\"%s\",\"calls_per_step\":%.1f,"
                  "\"host_ms_per_step\":%.3f,\"host_us_per_call\":%.2f}\n",
                  fields.c_str(), s.call.c_str(), s.where.c_str(),
                  static_cast<double>(s.calls) / steps, s.host_ms / steps,
                  1e3 * s.host_ms / static_cast<double>(s.calls));
    out += buf;
  }
  std::snprintf(buf, sizeof buf,
                "{%s,\"api\":\"all\",\"sites\":%zu,\"calls_per_step\":%.1f,"
                "\"host_ms_per_step\":%.3f,\"wall_ms_per_step\":%.3f}\n",
                fields.c_str(), sites.size(), static_cast<double>(calls) / steps, ms / steps,
                wall_ms / steps);
  return out + buf;
}

std::string kernel_profile_json(const char* bench, int steps, const std::function<void()>& fn) {
  KernelProfile profile;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) fn();
  // The wall time ends with the GPU's work, not when the host has queued the last step (a
  // GPU-bound step's wall time came out below its kernels'), nor after totals() has read
  // every event pair (host time that no step spends).
  profile.wait();
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<KernelProfile::Entry> all = profile.totals();
  double sum = 0, host = 0;
  for (const auto& e : all) {
    sum += e.ms;
    host += e.host_ms;
  }
  std::string out;
  char buf[320];
  for (const auto& e : all) {
    std::snprintf(buf, sizeof buf,
                  "{\"bench\":\"%s\",\"kernel\":\"%s\",\"calls_per_step\":%.1f,"
                  "\"ms_per_step\":%.3f,\"share\":%.3f,\"host_ms_per_step\":%.3f,"
                  "\"host_us_per_call\":%.1f}\n",
                  bench, e.kernel.c_str(), static_cast<double>(e.calls) / steps, e.ms / steps,
                  sum > 0 ? e.ms / sum : 0.0, e.host_ms / steps,
                  e.calls > 0 ? 1e3 * e.host_ms / static_cast<double>(e.calls) : 0.0);
    out += buf;
  }
  // Where a step's host time goes: inside the dispatches, and the rest (autograd, module
  // and engine code, allocation outside kernels); all under the profile's own event cost.
  std::snprintf(buf, sizeof buf,
                "{\"bench\":\"%s\",\"kernels\":\"all\",\"ms_per_step\":%.3f,"
                "\"host_ms_per_step\":%.3f,\"wall_ms_per_step\":%.3f}\n",
                bench, sum / steps, host / steps, wall_ms / steps);
  out += buf;
  return out;
}

double time_per_call(const std::function<void()>& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(std::move(t));
}

}  // namespace zt::bench

int main(int argc, char** argv) {
  auto& reg = zt::bench::registry();
  const std::string first = argc < 2 ? "" : argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    zt::bench::print_usage(stdout);
    return 0;
  }
  if (reg.find(first) == reg.end()) {
    if (!first.empty()) {
      std::vector<std::string> names;
      for (auto& [name, e] : reg) names.push_back(name);
      std::fprintf(stderr, "%s\n", zt::app::unknown_command("zt-bench", first, names).c_str());
    }
    zt::bench::print_usage(stderr);
    return zt::app::kUsageError;
  }
  // comm, zero, frozen and vqgpt run their ranks under mpirun. The others measure one
  // process: mpirun -np N would run N copies that share the cores and print N results.
  const char* procs = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!procs) procs = std::getenv("PMI_SIZE");
  const bool mpi_ranks =
      first == "comm" || first == "zero" || first == "frozen" || first == "vqgpt";
  // --help measures nothing: it is answered under mpirun too.
  const bool help = std::any_of(argv + 2, argv + argc, [](const char* a) {
    return std::string(a) == "--help" || std::string(a) == "-h";
  });
  if (!mpi_ranks && !help && procs && std::atoi(procs) > 1) {
    std::fprintf(stderr,
                 "zt-bench %s: measures one process; run it without mpirun (under mpirun, "
                 "comm, zero, frozen and vqgpt run one rank per process)\n",
                 first.c_str());
    return zt::app::kUsageError;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return reg[first].fn(args);
  } catch (const std::exception& e) {
    // An error every rank of an mpirun job raised together is printed by rank 0 alone.
    const auto* agreed = dynamic_cast<const zt::comm::AgreedError*>(&e);
    if (!agreed || agreed->rank() == 0 || !zt::comm::under_mpirun())
      std::fprintf(stderr, "zt-bench %s: %s\n", argv[1], e.what());
    return 1;
  }
}
