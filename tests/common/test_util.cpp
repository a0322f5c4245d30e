// Tensor comparisons, the finite-difference gradient checker and the other test helpers.
#include "common/test_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <sstream>

#include "common/fifo_reader.h"

namespace zt::test {

static ::testing::AssertionResult compare(const std::vector<double>& a,
                                          const std::vector<double>& b, double rtol, double atol) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
  std::ostringstream os;
  int bad = 0;
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    // Equal values (infinities of one sign included) match; a NaN on either side never
    // does, so a result that went NaN cannot pass as "close".
    const double d = std::abs(a[i] - b[i]);
    if (!(a[i] == b[i] || d <= atol + rtol * std::abs(b[i]))) {
      if (bad < 5) os << "\n  [" << i << "] " << a[i] << " vs " << b[i];
      ++bad;
    }
    const double distance = a[i] == b[i] ? 0.0 : std::isnan(d) ? INFINITY : d;
    if (distance > worst) {
      worst = distance;
      worst_i = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << a.size() << " elements differ; first mismatches:" << os.str()
         << "\n  largest difference " << worst << " at [" << worst_i << "]";
}

::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.sizes() != b.sizes())
    return ::testing::AssertionFailure()
           << "shapes differ: " << shape_str(a.sizes()) << " vs " << shape_str(b.sizes());
  return compare(a.to_vector(), b.to_vector(), rtol, atol);
}

::testing::AssertionResult values_are(const Tensor& a, const std::vector<double>& expected,
                                      double tol) {
  return compare(a.to_vector(), expected, tol, tol);
}

Tensor rand_leaf(const Shape& sizes, uint64_t seed) {
  Generator g(seed);
  Tensor t = randn(sizes, g, DType::f64);
  t.set_requires_grad(true);
  return t;
}

::testing::AssertionResult grad_check(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                      const std::vector<Tensor>& inputs, double eps, double tol) {
  // Scalarize with fixed weights.
  Tensor probe = fn(inputs);
  Generator g(1234);
  Tensor w = randn(probe.sizes(), g, DType::f64);
  auto scalar = [&](const std::vector<Tensor>& in) { return sum(mul(fn(in), w)); };
  int checked = 0;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) {
      t.set_grad(Tensor());
      ++checked;
    }
  if (checked == 0) return ::testing::AssertionFailure() << "grad_check: no input requires grad";
  scalar(inputs).backward();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    if (x.dtype() != DType::f64)
      return ::testing::AssertionFailure() << "grad_check needs f64 inputs (input " << k << ")";
    Tensor analytic = x.grad();
    if (!analytic.defined())
      return ::testing::AssertionFailure() << "input " << k << " received no gradient";
    std::vector<double> num(x.numel());
    ZT_CHECK(x.is_contiguous(), "grad_check: contiguous leaves only");
    double* p = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double orig = p[i];
      autograd::NoGradGuard ng;
      p[i] = orig + eps;
      double fp = scalar(inputs).item();
      p[i] = orig - eps;
      double fm = scalar(inputs).item();
      p[i] = orig;
      num[i] = (fp - fm) / (2 * eps);
    }
    auto r = compare(analytic.to_vector(), num, tol, tol);
    if (!r)
      return ::testing::AssertionFailure() << "gradient of input " << k << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string error_of_fifo_reader(const std::string& fifo, const std::function<void()>& fn) {
  auto done = std::async(std::launch::async, [&] { return error_of(fn); });
  for (auto wait = std::chrono::seconds(10); done.wait_for(wait) == std::future_status::timeout;
       wait = std::chrono::seconds(1)) {
    ADD_FAILURE() << "waited on the FIFO '" << fifo << "'";
    ::close(::open(fifo.c_str(), O_WRONLY));
  }
  return done.get();
}

std::string process_temp_dir(const std::string& name) {
  // One remover per name, destroyed (in reverse order of creation) at exit.
  struct Removed {
    std::filesystem::path path;
    pid_t owner = ::getpid();  // a forked child leaves it to its parent
    ~Removed() {
      std::error_code ec;
      if (::getpid() == owner) std::filesystem::remove_all(path, ec);
    }
  };
  static std::mutex mu;
  static std::map<std::string, Removed> made;
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = made.try_emplace(name);
  if (fresh) {
    it->second.path =
        std::filesystem::path(::testing::TempDir()) / (name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(it->second.path);
    std::filesystem::create_directories(it->second.path);
  }
  return it->second.path.string();
}

std::string write_temp_file(const std::string& folder, const std::string& sub,
                            const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::path(process_temp_dir(folder)) / sub;
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

}  // namespace zt::test
