// Library call sites and their profiles (core/api_profile.h).
#include "core/api_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/work_counts.h"

namespace zt {

namespace detail {

std::atomic<int> g_api_profiles{0};

namespace {
// Every site made so far, in the order of their first calls. Never destroyed: sites are
// function statics, and the exit report runs after static destruction has begun.
std::mutex& sites_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<ApiSite*>& all_sites() {
  static auto* v = new std::vector<ApiSite*>;
  return *v;
}

const char* base_name(const char* file) {
  const char* slash = std::strrchr(file, '/');
  return slash ? slash + 1 : file;
}

// ZT_API_PROFILE=1: one profile for the whole process, printed to stderr at exit.
void print_process_profile();
ApiProfile* g_process_profile = [] {
  const char* v = std::getenv("ZT_API_PROFILE");
  if (!v || !*v || std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 ||
      std::strcmp(v, "off") == 0)
    return static_cast<ApiProfile*>(nullptr);
  auto* p = new ApiProfile;
  std::atexit(print_process_profile);
  return p;
}();

void print_process_profile() {
  const std::vector<ApiProfile::Site> sites = g_process_profile->sites();
  double ms = 0;
  int64_t calls = 0;
  for (const auto& s : sites) {
    ms += s.host_ms;
    calls += s.calls;
  }
  std::fprintf(stderr, "zt api profile (ZT_API_PROFILE): %.1f ms of host time in %lld calls\n", ms,
               static_cast<long long>(calls));
  constexpr size_t kShown = 30;
  for (size_t i = 0; i < std::min(sites.size(), kShown); ++i)
    std::fprintf(stderr, "  %10.2f ms %9lld calls  %s  (%s)\n", sites[i].host_ms,
                 static_cast<long long>(sites[i].calls), sites[i].call.c_str(),
                 sites[i].where.c_str());
  if (sites.size() > kShown) std::fprintf(stderr, "  ... %zu more sites\n", sites.size() - kShown);
}
}  // namespace

ApiSite::ApiSite(const char* call, const char* file, int line)
    : call(call), file(base_name(file)), line(line) {
  std::lock_guard<std::mutex> lock(sites_mutex());
  all_sites().push_back(this);
}

int64_t api_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ApiClock::ApiClock(ApiSite& site) : site_(site) {
  ++thread_work_counts().api_calls;
  if (g_api_profiles.load(std::memory_order_relaxed) > 0) t0_ = api_clock_ns();
}

}  // namespace detail

ApiProfile::ApiProfile() {
  std::lock_guard<std::mutex> lock(detail::sites_mutex());
  for (const detail::ApiSite* s : detail::all_sites())
    start_.emplace_back(s->calls.load(std::memory_order_relaxed),
                        s->ns.load(std::memory_order_relaxed));
  detail::g_api_profiles.fetch_add(1);
}

ApiProfile::~ApiProfile() {
  detail::g_api_profiles.fetch_sub(1);
}

std::vector<ApiProfile::Site> ApiProfile::sites() const {
  std::vector<Site> out;
  // A site in a template is one ApiSite per instantiation: one row per call and line.
  std::map<std::pair<std::string, std::string>, size_t> row_of;
  std::lock_guard<std::mutex> lock(detail::sites_mutex());
  const std::vector<detail::ApiSite*>& all = detail::all_sites();
  for (size_t i = 0; i < all.size(); ++i) {
    const auto [calls0, ns0] = i < start_.size() ? start_[i] : std::pair<int64_t, int64_t>{0, 0};
    const int64_t calls = all[i]->calls.load(std::memory_order_relaxed) - calls0;
    if (calls == 0) continue;
    const std::string text = all[i]->call;
    Site site{text.substr(0, text.find('(')),
              std::string(all[i]->file) + ":" + std::to_string(all[i]->line), calls,
              1e-6 * static_cast<double>(all[i]->ns.load(std::memory_order_relaxed) - ns0)};
    const auto [it, fresh] = row_of.emplace(std::make_pair(site.call, site.where), out.size());
    if (fresh) {
      out.push_back(std::move(site));
    } else {
      out[it->second].calls += site.calls;
      out[it->second].host_ms += site.host_ms;
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Site& a, const Site& b) { return a.host_ms > b.host_ms; });
  return out;
}

}  // namespace zt
