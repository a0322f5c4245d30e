// The per-step agreement on the gradient layout, on replica writes and on the modules
// fetched.
#include "zero/window_check.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <vector>

#include "zero/replicas.h"

namespace zt::zero {

namespace {

// The parameter names of a layout, in order (bucket marks left out).
std::vector<std::string> names_in(const std::string& layout) {
  std::vector<std::string> names;
  std::istringstream in(layout);
  for (std::string line; std::getline(in, line);)
    if (line != "|") names.push_back(line);
  return names;
}

// "a.weight, a.bias | b.weight |", at most `limit` characters.
std::string one_line(const std::string& layout, size_t limit = 200) {
  std::string s;
  for (char c : layout) s += c == '\n' ? ' ' : c;
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s.size() <= limit ? s : s.substr(0, limit) + " ...";
}

[[noreturn]] void fail_with(const std::vector<std::string>& layouts, const std::string& model,
                            int rank) {
  std::vector<std::set<std::string>> sets;
  std::vector<std::string> order;  // every name, first seen first
  for (const std::string& l : layouts) {
    sets.emplace_back();
    for (std::string& n : names_in(l))
      if (sets.back().insert(n).second && std::find(order.begin(), order.end(), n) == order.end())
        order.push_back(n);
  }
  std::ostringstream os;
  os << "zero::Engine::step: the ranks reduced different gradients of this engine's " << model
     << " in this window: ";
  bool named = false;
  for (const std::string& n : order) {
    std::vector<int> with, without;
    for (size_t r = 0; r < sets.size(); ++r)
      (sets[r].count(n) ? with : without).push_back(static_cast<int>(r));
    if (without.empty()) continue;
    os << "'" << n << "' got a gradient on ranks " << rank_set(with) << " and none on ranks "
       << rank_set(without);
    named = true;
    break;
  }
  if (!named) {
    os << "the same parameters, in different orders or buckets (";
    for (size_t r = 0; r < layouts.size(); ++r)
      os << (r ? "; " : "") << "rank " << r << ": " << one_line(layouts[r]);
    os << ")";
  }
  os << ". Every rank must backpropagate through the same parameters at each step: the "
        "reduce-scatter buckets are laid out from the gradients each rank got, so they no "
        "longer line up and would mix one parameter's gradient into another's. On the ranks "
        "whose loss skips a branch, add 0 * (its output).sum() to the loss. This window's "
        "gradients were discarded; nothing was updated";
  throw comm::AgreedError(os.str(), rank);
}

}  // namespace

void fail_layouts_differ(const std::string& layout, const std::string& model,
                         comm::Communicator& comm) {
  fail_with(comm.all_gather_bytes(layout), model, comm.rank());
}

WindowFlags agree_on_window(const std::string& layout, uint64_t fetches_hash, bool replicas_written,
                            const std::vector<uint8_t>& written_buffers, comm::Communicator& comm) {
  WindowFlags any;
  any.replicas_written = replicas_written;
  if (comm.size() == 1) return any;
  struct Report {
    uint64_t layout;
    uint64_t fetches;
    uint64_t written;
    uint64_t buffers;
  };
  const std::vector<Report> all = comm.all_gather_object(
      Report{fnv1a(layout.data(), layout.size()), fetches_hash, replicas_written ? 1u : 0u,
             fnv1a(written_buffers.data(), written_buffers.size())});
  for (const Report& r : all) {
    any.replicas_written = any.replicas_written || r.written != 0;
    any.layouts_agree = any.layouts_agree && r.layout == all[0].layout;
    any.fetches_agree = any.fetches_agree && r.fetches == all[0].fetches;
    any.buffer_writes_agree = any.buffer_writes_agree && r.buffers == all[0].buffers;
  }
  return any;
}

void fail_buffer_writes_differ(const std::vector<std::string>& names,
                               const std::vector<uint8_t>& written, const std::string& model,
                               comm::Communicator& comm) {
  const std::vector<std::string> all =
      comm.all_gather_bytes(std::string(written.begin(), written.end()));
  for (size_t i = 0; i < names.size(); ++i) {
    std::string wrote;
    bool differ = false;
    for (size_t r = 0; r < all.size(); ++r) {
      const bool w = i < all[r].size() && all[r][i] != 0;
      differ = differ || w != (i < all[0].size() && all[0][i] != 0);
      if (w) wrote += (wrote.empty() ? "" : ", ") + std::to_string(r);
    }
    if (differ)
      throw comm::AgreedError(
          detail::cat("zero::Engine: buffer '", names[i], "' (of this engine's ", model,
                      ") was written on rank(s) ", wrote,
                      " only since the last step, outside the model's forwards (a load or an "
                      "edit on some ranks: ",
                      "zero::load_state_dict loads on rank 0 and broadcasts); the step's buffer "
                      "sync would mix the ranks' values into one nobody wrote. Write it on every "
                      "rank (zero::load_state_dict, or a GatheredParameters scope with "
                      "modifier_rank 0, broadcasts rank 0's values) and call step() again"),
          comm.rank());
  }
  throw comm::AgreedError(
      detail::cat("zero::Engine: the ranks wrote different buffers of this engine's ", model,
                  " since the last step"),
      comm.rank());
}

}  // namespace zt::zero
