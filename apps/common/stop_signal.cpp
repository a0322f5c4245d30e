// StopOnSignal: sigaction handlers that record the first SIGINT/SIGTERM.
#include "apps/common/stop_signal.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>
#include <vector>

namespace zt::app {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM};
std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");

std::mutex g_mutex;  // guards the count and the saved actions
int g_holders = 0;
struct sigaction g_previous[2];

void say(const char* text) {  // async-signal-safe
  ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void on_signal(int sig) {
  int none = 0;
  if (g_received.compare_exchange_strong(none, sig)) {
    say(sig == SIGINT ? "\nzt: SIGINT: stopping after this step (again: at once)\n"
                      : "\nzt: SIGTERM: stopping after this step (again: at once)\n");
    return;
  }
  std::signal(sig, SIG_DFL);  // the second signal: the default action, now
  std::raise(sig);
}

}  // namespace

StopOnSignal::StopOnSignal() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_holders++ > 0) return;
  g_received = 0;
  struct sigaction act;
  std::memset(&act, 0, sizeof act);
  act.sa_handler = on_signal;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;  // reads, writes and waits in progress carry on
  for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &act, &g_previous[i]);
}

StopOnSignal::~StopOnSignal() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (--g_holders > 0) return;
  for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

int StopOnSignal::received() {
  return g_received.load();
}

int agreed_stop_signal(comm::Communicator& comm) {
  const int mine = StopOnSignal::received();
  if (comm.size() == 1) return mine;
  // Host bytes, not a device collective: under NCCL this runs every step without a wait
  // on the GPU.
  const std::vector<int> all = comm.all_gather_object<int>(mine);
  return *std::max_element(all.begin(), all.end());
}

}  // namespace zt::app
