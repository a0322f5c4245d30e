// Communicator: argument checks, sequence numbers and counters shared by every backend.
// Backends only see validated, numbered requests (submit).
#include "zero/comm/communicator.h"

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "zero/comm/reduce.h"  // bytes_of

namespace zt::comm {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
  }
  return "?";
}

// $ZT_COMM_TIMEOUT_MS (a positive whole number of milliseconds), else ten minutes.
static std::chrono::milliseconds default_timeout() {
  const char* s = std::getenv("ZT_COMM_TIMEOUT_MS");
  if (!s || !*s) return std::chrono::milliseconds(600'000);
  char* end = nullptr;
  errno = 0;
  const long long ms = std::strtoll(s, &end, 10);
  ZT_CHECK(*end == '\0' && errno == 0 && ms > 0, "ZT_COMM_TIMEOUT_MS: '", s,
           "' is not a positive whole number of milliseconds (e.g. 600000 for ten minutes)");
  return std::chrono::milliseconds(ms);
}

Communicator::Communicator(int rank, int size)
    : rank_(rank), size_(size), timeout_(default_timeout()) {
  ZT_CHECK(size >= 1 && rank >= 0 && rank < size, "communicator: bad rank ", rank, " of ", size);
}

void Communicator::set_timeout(std::chrono::milliseconds t) {
  ZT_CHECK(t.count() > 0, "Communicator::set_timeout: ", t.count(),
           " ms is not a positive timeout (a huge value, milliseconds::max(), waits for ever)");
  timeout_.store(t, std::memory_order_relaxed);
}

std::string Communicator::signature(const Request& req) {
  std::ostringstream os;
  os << collective_name(req.kind);
  const Tensor& t = req.out.defined() ? req.out : req.in;
  if (t.defined()) {
    os << " (" << dtype_name(t.dtype()) << " x " << t.numel();
    if (req.kind == Collective::kReduceScatter || req.kind == Collective::kAllReduce)
      os << ", " << reduce_op_name(req.op);
    if (req.kind == Collective::kBroadcast || req.kind == Collective::kScatter)
      os << ", root " << req.root;
    os << ')';
  }
  if (req.label) os << " [" << req.label << ']';
  return os.str();
}

std::string mismatch_message(int64_t seq, const std::string& sides) {
  return detail::cat("zt.comm: mismatched collectives at sequence #", seq, ": ", sides,
                     " (every rank must issue the same collectives in the same order: did the "
                     "ranks take different code paths, such as a data-dependent branch or a "
                     "module called on some ranks only?)");
}

std::string Communicator::describe(const Request& req) const {
  std::string sig = signature(req);
  size_t name_end = sig.find(' ');
  if (name_end == std::string::npos) name_end = sig.size();
  return sig.substr(0, name_end) + " #" + std::to_string(req.seq) + sig.substr(name_end) +
         " on rank " + std::to_string(rank_);
}

void Communicator::check_healthy(const Request& req) const {
  std::string why = abort_reason();
  if (!why.empty())
    throw AbortedError(detail::cat("zt.comm: ", describe(req), " aborted because ", why));
}

namespace {
const char* kHint =
    " (collective tensors must be contiguous, with storage, on the "
    "communicator's device)";

void check_tensor(const Tensor& t, const char* what, Device dev) {
  ZT_CHECK(t.defined(), what, ": tensor is undefined");
  ZT_CHECK(t.has_storage(), what, ": tensor '", t.name(), "' has no storage", kHint);
  ZT_CHECK(t.is_contiguous(), what, ": tensor ", t.str(), " is not contiguous", kHint);
  ZT_CHECK(t.device() == dev, what, ": tensor is on ", t.device().str(),
           " but the communicator works on ", dev.str(), kHint);
}

// Exact in-place layouts are allowed (in == out's slice r); any other overlap is an error.
void check_overlap(const Tensor& a, const Tensor& b, const char* what, const char* allowed) {
  const char* pa = bytes_of(a);
  const char* pb = bytes_of(b);
  int64_t na = a.numel() * static_cast<int64_t>(dtype_size(a.dtype()));
  int64_t nb = b.numel() * static_cast<int64_t>(dtype_size(b.dtype()));
  if (na == 0 || nb == 0 || pa == allowed) return;
  ZT_CHECK(pa + na <= pb || pb + nb <= pa, what,
           ": input and output overlap; only the exact in-place layout (in is out's slice of "
           "this rank) is supported");
}

// A collective that finished when it was issued.
class DoneWork : public Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};

}  // namespace

// What a collective of one rank amounts to: its identity, a copy at most.
Device Communicator::tensor_device(const Tensor& t) const {
  // One rank exchanges nothing: its collectives run in place wherever the tensors are.
  return size_ == 1 && t.defined() ? t.device() : device();
}

void Communicator::run_alone(const Request& r) {
  switch (r.kind) {
    case Collective::kAllGather:
    case Collective::kReduceScatter:  // the sum or mean of one contribution is itself
    case Collective::kScatter:
      if (r.out.data_ptr() != r.in.data_ptr()) r.out.reshape({-1}).copy_(r.in.reshape({-1}));
      break;
    case Collective::kAllGatherBytes:
      r.bytes_out->assign(1, *r.bytes_in);
      break;
    default:  // all_reduce, broadcast and barrier leave one rank's tensor as it is
      break;
  }
}

std::shared_ptr<Work> Communicator::all_gather(const Tensor& out, const Tensor& in, bool async) {
  check_tensor(out, "all_gather out", tensor_device(out));
  check_tensor(in, "all_gather in", tensor_device(out));
  ZT_CHECK(out.dtype() == in.dtype(), "all_gather: dtypes differ (out ", dtype_name(out.dtype()),
           ", in ", dtype_name(in.dtype()), ")");
  ZT_CHECK(out.numel() == in.numel() * size_, "all_gather: out has ", out.numel(),
           " elements, expected size() * in.numel() = ", size_, " * ", in.numel());
  int64_t e = static_cast<int64_t>(dtype_size(in.dtype()));
  check_overlap(in, out, "all_gather", bytes_of(out) + rank_ * in.numel() * e);
  const int64_t counted = received_bytes(Collective::kAllGather, in.numel(), e, size_, rank_, 0);
  Request r;
  r.kind = Collective::kAllGather;
  r.counted_bytes = counted;
  r.out = out;
  r.in = in;
  return issue(std::move(r), async);
}

std::shared_ptr<Work> Communicator::reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op,
                                                   bool async) {
  check_tensor(out, "reduce_scatter out", tensor_device(out));
  check_tensor(in, "reduce_scatter in", tensor_device(out));
  ZT_CHECK(out.dtype() == in.dtype(), "reduce_scatter: dtypes differ (out ",
           dtype_name(out.dtype()), ", in ", dtype_name(in.dtype()), ")");
  ZT_CHECK(op != ReduceOp::kMax, "reduce_scatter: supports sum and avg, not max");
  ZT_CHECK(in.dtype() != DType::b8, "reduce_scatter: cannot sum bool tensors");
  ZT_CHECK(in.numel() == out.numel() * size_, "reduce_scatter: in has ", in.numel(),
           " elements, expected size() * out.numel() = ", size_, " * ", out.numel(),
           " (pad the input to a multiple of size())");
  int64_t e = static_cast<int64_t>(dtype_size(in.dtype()));
  check_overlap(out, in, "reduce_scatter", bytes_of(in) + rank_ * out.numel() * e);
  const int64_t counted =
      received_bytes(Collective::kReduceScatter, out.numel(), e, size_, rank_, 0);
  Request r;
  r.kind = Collective::kReduceScatter;
  r.counted_bytes = counted;
  r.out = out;
  r.in = in;
  r.op = op;
  return issue(std::move(r), async);
}

std::shared_ptr<Work> Communicator::all_reduce(const Tensor& t, ReduceOp op, bool async) {
  check_tensor(t, "all_reduce", tensor_device(t));
  ZT_CHECK(t.dtype() != DType::b8 || op == ReduceOp::kMax,
           "all_reduce: bool tensors support max only");
  const int64_t counted =
      received_bytes(Collective::kAllReduce, t.numel(), dtype_size(t.dtype()), size_, rank_, 0);
  Request r;
  r.kind = Collective::kAllReduce;
  r.counted_bytes = counted;
  r.out = t;
  r.op = op;
  return issue(std::move(r), async);
}

std::shared_ptr<Work> Communicator::broadcast(const Tensor& t, int root, bool async) {
  check_tensor(t, "broadcast", tensor_device(t));
  ZT_CHECK(root >= 0 && root < size_, "broadcast: root ", root, " is not a rank of ", size_);
  const int64_t counted =
      received_bytes(Collective::kBroadcast, t.numel(), dtype_size(t.dtype()), size_, rank_, root);
  Request r;
  r.kind = Collective::kBroadcast;
  r.counted_bytes = counted;
  r.out = t;
  r.root = root;
  return issue(std::move(r), async);
}

std::shared_ptr<Work> Communicator::scatter(const Tensor& out, const Tensor& in, int root,
                                            bool async) {
  ZT_CHECK(root >= 0 && root < size_, "scatter: root ", root, " is not a rank of ", size_);
  check_tensor(out, "scatter out", tensor_device(out));
  Request r;
  if (rank_ == root) {
    check_tensor(in, "scatter in", tensor_device(out));
    ZT_CHECK(in.dtype() == out.dtype(), "scatter: dtypes differ (out ", dtype_name(out.dtype()),
             ", in ", dtype_name(in.dtype()), ")");
    ZT_CHECK(in.numel() == out.numel() * size_, "scatter: in has ", in.numel(),
             " elements, expected size() * out.numel() = ", size_, " * ", out.numel());
    int64_t e = static_cast<int64_t>(dtype_size(in.dtype()));
    check_overlap(out, in, "scatter", bytes_of(in) + rank_ * out.numel() * e);
    r.in = in;
  }
  const int64_t counted = received_bytes(Collective::kScatter, out.numel(), dtype_size(out.dtype()),
                                         size_, rank_, root);
  r.kind = Collective::kScatter;
  r.counted_bytes = counted;
  r.out = out;
  r.root = root;
  return issue(std::move(r), async);
}

void Communicator::barrier() {
  Request r;
  r.kind = Collective::kBarrier;
  issue(std::move(r), false);
}

std::vector<std::string> Communicator::all_gather_bytes(const std::string& mine) {
  return all_gather_bytes(mine, nullptr);
}

std::vector<std::string> Communicator::all_gather_bytes(const std::string& mine,
                                                        const char* label) {
  Request r;
  r.kind = Collective::kAllGatherBytes;
  r.label = label;
  r.bytes_in = std::make_shared<const std::string>(mine);
  r.bytes_out = std::make_shared<std::vector<std::string>>();
  auto out = r.bytes_out;
  issue(std::move(r), false);
  ZT_CHECK(static_cast<int>(out->size()) == size_, "all_gather_bytes: backend returned ",
           out->size(), " entries for ", size_, " ranks");
  int64_t received = 0;
  for (int j = 0; j < size_; ++j)
    if (j != rank_) received += static_cast<int64_t>((*out)[j].size());
  count(Collective::kAllGatherBytes, received);
  return std::move(*out);
}

namespace {
thread_local const char* t_label = nullptr;  // CollectiveLabel's
}  // namespace

CollectiveLabel::CollectiveLabel(const char* label) : previous_(std::exchange(t_label, label)) {}
CollectiveLabel::~CollectiveLabel() {
  t_label = previous_;
}
const char* CollectiveLabel::current() {
  return t_label;
}
const char* CollectiveLabel::intern(const std::string& text) {
  // Never freed: a collective queued on a communication thread may read its label after
  // whatever made it is gone. Node-based, so a string never moves.
  static std::mutex mu;
  static std::unordered_set<std::string> texts;
  std::lock_guard<std::mutex> lock(mu);
  return texts.insert(text).first->c_str();
}

std::shared_ptr<Work> Communicator::issue(Request req, bool async) {
  if (!req.label) req.label = CollectiveLabel::current();
  if (agreement_) {
    Request a;
    a.kind = Collective::kAllGatherBytes;
    a.label = std::exchange(agreement_, nullptr);
    a.bytes_in = std::make_shared<const std::string>();
    a.bytes_out = std::make_shared<std::vector<std::string>>();
    issue(std::move(a), false);
  }
  req.seq = seq_++;
  req.blocking = !async;
  check_healthy(req);
  // all_gather_bytes counts what it received once done (an agreement is not counted).
  if (req.kind != Collective::kAllGatherBytes) count(req.kind, req.counted_bytes);
  if (size_ == 1) {
    // One rank: done here, on the caller's thread (and for GPU tensors on its compute
    // stream), so it needs no communication thread and no host wait, and issue order
    // holds because every request of this communicator runs here.
    run_alone(req);
    return std::make_shared<DoneWork>();
  }
  std::shared_ptr<Work> w = submit(std::move(req));
  if (!async) w->wait();
  return w;
}

void Communicator::count(Collective c, int64_t bytes) {
  std::lock_guard<std::mutex> lock(counters_mu_);
  auto& k = counters_.per_kind[static_cast<int>(c)];
  k.calls += 1;
  k.bytes += bytes;
}

CommCounters Communicator::counters() const {
  std::lock_guard<std::mutex> lock(counters_mu_);
  return counters_;
}

void Communicator::reset_counters() {
  std::lock_guard<std::mutex> lock(counters_mu_);
  counters_ = CommCounters{};
}

}  // namespace zt::comm
