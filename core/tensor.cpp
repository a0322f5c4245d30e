// Tensor metadata, views (with their backward rules), copies and autograd entry points.
#include "core/tensor.h"

#include <algorithm>
#include <optional>

#include "core/autograd.h"
#include "core/kernels.h"
#include "core/ops.h"
#include "core/ops/dispatch.h"

namespace zt {

Tensor Tensor::empty(const Shape& sizes, DType dtype, Device device) {
  for (int64_t d : sizes) ZT_CHECK(d >= 0, "negative size in shape ", shape_str(sizes));
  int64_t bytes = 0;
  ZT_CHECK(
      !__builtin_mul_overflow(shape_numel(sizes), static_cast<int64_t>(dtype_size(dtype)), &bytes),
      "shape ", shape_str(sizes), " of ", dtype_name(dtype),
      " has more bytes than an int64 counts");
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  impl->device = device;
  impl->storage = std::make_shared<Storage>(bytes, device);
  return Tensor(std::move(impl));
}

// The dim is wrapped (an undefined tensor refused) before the shape is touched.
int64_t Tensor::size(int64_t d) const {
  const int64_t i = wrap_dim(d, dim(), "size");
  return impl_->sizes[i];
}
int64_t Tensor::stride(int64_t d) const {
  const int64_t i = wrap_dim(d, dim(), "stride");
  return impl_->strides[i];
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to lay out (as PyTorch's)
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (impl_->sizes[i] == 1) continue;
    if (impl_->strides[i] != expected) return false;
    expected *= impl_->sizes[i];
  }
  return true;
}

// A tensor whose storage was released (a partitioned ZeRO-3 parameter) was touched. In a
// backward, the forward that used it did so outside whatever gathered it then.
[[noreturn]] static void fail_released(const TensorImpl& t) {
  ZT_FAIL("parameter '", t.name.empty() ? "<unnamed>" : t.name,
          "' is not available (NOT_AVAILABLE: its data is partitioned across ranks)",
          autograd::in_backward()
              ? " to the backward that needs it: a use outside its module's call (in the "
                "loss, say), or inside a GatheredParameters scope that closed before the "
                "backward, is not gathered again for the backward"
              : "",
          ". ", t.unavailable_hint.empty() ? "Gather it first." : t.unavailable_hint);
}

const std::shared_ptr<Storage>& Tensor::storage() const {
  if (!meta().storage) fail_released(*impl_);
  return impl_->storage;
}

std::string Tensor::str() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype())) + shape_str(sizes()) + " " + device().str();
}

void* Tensor::data_ptr() const {
  ZT_CHECK(defined(), "data access on an undefined tensor");
  if (!impl_->storage) fail_released(*impl_);
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * dtype_size(dtype());
}

std::vector<double> Tensor::to_vector() const {
  ++detail::thread_work_counts().host_reads;
  Tensor c = detach().to(Device::cpu()).contiguous();
  std::vector<double> out(c.numel());
  dispatch_all(dtype(), [&]<typename T>() {
    const T* p = static_cast<const T*>(c.data_ptr());
    for (int64_t i = 0; i < c.numel(); ++i) out[i] = static_cast<double>(p[i]);
  });
  return out;
}

double Tensor::item() const {
  ZT_CHECK(numel() == 1, "item() needs a one-element tensor, got shape ", shape_str(sizes()));
  return to_vector()[0];
}

void Tensor::set_data(const Tensor& src) const {
  ZT_CHECK(src.defined(), "set_data: the source is undefined");
  meta().storage = src.impl_->storage;
  impl_->sizes = src.impl_->sizes;
  impl_->strides = src.impl_->strides;
  impl_->offset = src.impl_->offset;
  impl_->dtype = src.impl_->dtype;
  impl_->device = src.impl_->device;
}

// ---------------------------------------------------------------- views

void Tensor::undefined_tensor() {
  ZT_FAIL(
      "an undefined tensor (Tensor(): no shape, no data) was used where one is needed; an "
      "optional argument left out, or a gradient not computed yet (.grad() before backward)?");
}

Tensor Tensor::make_view(const Shape& sizes, const Shape& strides, int64_t offset) const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = meta().storage;
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = impl_->dtype;
  impl->device = impl_->device;
  impl->name = impl_->name;
  impl->unavailable_hint = impl_->unavailable_hint;
  // A view of a tensor that requires grad made in no-grad mode has no history: a write to
  // it (or a view of it) in grad mode would go unseen. detach() and as_strided() clear it.
  impl->no_grad_view =
      impl_->no_grad_view || (impl_->requires_grad && !autograd::grad_mode_enabled());
  // Of a tensor that requires no grad it has no history either: should that tensor require
  // grad later, autograd refuses the view in grad mode where it is used (an op, a write),
  // not where a view of it is made. detach() and as_strided() clear it.
  if (!impl_->requires_grad)
    impl->view_base = impl_->view_base.expired() ? impl_ : impl_->view_base.lock();
  return Tensor(std::move(impl));
}

static Shape infer_size(const Shape& sizes, int64_t numel, const char* op) {
  Shape out = sizes;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      ZT_CHECK(infer < 0, op, ": only one dimension can be -1 in ", shape_str(sizes));
      infer = static_cast<int64_t>(i);
    } else {
      ZT_CHECK(out[i] >= 0, op, ": invalid size in ", shape_str(sizes));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    ZT_CHECK(known > 0 && numel % known == 0, op, ": shape ", shape_str(sizes), " is invalid for ",
             numel, " elements");
    out[infer] = numel / known;
  }
  ZT_CHECK(shape_numel(out) == numel, op, ": shape ", shape_str(sizes), " is invalid for ", numel,
           " elements");
  return out;
}

// Strides for viewing (sizes, strides) as `target` without a copy, or nullopt if the
// memory layout does not allow it (the chunk rule: each run of source dims that is
// contiguous in memory must map onto whole target dims).
static std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides,
                                         const Shape& target) {
  Shape out(target.size(), 1);
  if (sizes.empty()) return out;
  if (shape_numel(sizes) == 0) return contiguous_strides(target);  // no element to place
  int64_t view_d = static_cast<int64_t>(target.size()) - 1;
  int64_t chunk_base = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    bool chunk_ends = d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
      out[view_d] = view_numel * chunk_base;
      view_numel *= target[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base = strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Tensor Tensor::view(const Shape& sizes) const {
  Shape target = infer_size(sizes, numel(), "view");
  Shape st;
  if (is_contiguous()) {
    st = contiguous_strides(target);
  } else {
    auto vs = view_strides(this->sizes(), strides(), target);
    ZT_CHECK(vs.has_value(), "view: cannot view a non-contiguous tensor of shape ",
             shape_str(this->sizes()), " as ", shape_str(target),
             "; use reshape() or contiguous() first");
    st = *vs;
  }
  Tensor out = make_view(target, st, offset());
  if (!requires_grad() || !autograd::grad_mode_enabled()) return out;
  Shape in_sizes = this->sizes();
  autograd::record("view", {*this}, {out}, [in_sizes](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].reshape(in_sizes)};
  });
  return out;
}

Tensor Tensor::reshape(const Shape& sizes) const {
  Shape target = infer_size(sizes, numel(), "reshape");
  if (is_contiguous()) return view(target);
  auto vs = view_strides(this->sizes(), strides(), target);
  if (vs) return view(target);
  return contiguous().view(target);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  ZT_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: got ", dims.size(),
           " dims for a tensor with ", dim());
  Shape sz(dims.size()), st(dims.size());
  std::vector<int64_t> inv(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    ZT_CHECK(!seen[d], "permute: repeated dimension ", d);
    seen[d] = true;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
    inv[d] = static_cast<int64_t>(i);
  }
  Tensor out = make_view(sz, st, offset());
  if (!requires_grad() || !autograd::grad_mode_enabled()) return out;
  autograd::record("permute", {*this}, {out}, [inv](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].permute(inv)};
  });
  return out;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  if (dim() == 0) {  // as PyTorch: dims 0 and -1 name the scalar itself
    wrap_dim(d0, 1, "transpose");
    wrap_dim(d1, 1, "transpose");
    return view({});  // a new view, as below, whose hooks see its own gradient
  }
  std::vector<int64_t> p(dim());
  for (int64_t i = 0; i < dim(); ++i) p[i] = i;
  std::swap(p[wrap_dim(d0, dim(), "transpose")], p[wrap_dim(d1, dim(), "transpose")]);
  return permute(p);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, dim(), "slice");
  ZT_CHECK(step > 0, "slice: step must be positive, got ", step);
  int64_t n = sizes()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sz = sizes(), st = strides();
  sz[d] = end > start ? (end - start - 1) / step + 1 : 0;
  st[d] *= step;
  Tensor out = make_view(sz, st, offset() + start * strides()[d]);
  if (!requires_grad() || !autograd::grad_mode_enabled()) return out;
  Shape in_sizes = sizes();
  DType dt = dtype();
  Device dev = device();
  autograd::record("slice", {*this}, {out}, [=](const std::vector<Tensor>& g) {
    Tensor gi = zeros(in_sizes, dt, dev);
    gi.slice(d, start, end, step).copy_(g[0]);
    return std::vector<Tensor>{gi};
  });
  return out;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim(), "narrow");
  const int64_t n = sizes()[d];
  const int64_t from = start < 0 ? start + n : start;  // the error names start as given
  ZT_CHECK(from >= 0 && from <= n && length >= 0 && length <= n - from, "narrow: ", length,
           " elements from ", start, " are out of bounds for dimension ", d, " of size ", n);
  return slice(d, from, from + length, 1);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, dim(), "select");
  int64_t n = sizes()[d];
  ZT_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dimension ", d,
           " of size ", n);
  if (index < 0) index += n;
  return narrow(d, index, 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& sizes) const {
  ZT_CHECK(static_cast<int64_t>(sizes.size()) >= dim(), "expand: target ", shape_str(sizes),
           " has fewer dims than ", shape_str(this->sizes()));
  size_t lead = sizes.size() - dim();
  Shape sz(sizes.size()), st(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i < lead) {
      ZT_CHECK(sizes[i] >= 0, "expand: -1 not allowed for new leading dims");
      sz[i] = sizes[i];
      st[i] = 0;
      continue;
    }
    int64_t cur = this->sizes()[i - lead];
    ZT_CHECK(sizes[i] >= -1, "expand: negative size ", sizes[i], " in ", shape_str(sizes));
    int64_t want = sizes[i] == -1 ? cur : sizes[i];
    ZT_CHECK(cur == want || cur == 1, "expand: cannot expand ", shape_str(this->sizes()), " to ",
             shape_str(sizes));
    sz[i] = want;
    st[i] = (cur == want) ? strides()[i - lead] : 0;
  }
  Tensor out = make_view(sz, st, offset());
  if (!requires_grad() || !autograd::grad_mode_enabled()) return out;
  Shape in_sizes = this->sizes();
  autograd::record("expand", {*this}, {out}, [in_sizes](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{sum_to(g[0], in_sizes)};
  });
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, std::max<int64_t>(dim(), 1), "squeeze");
  // Nothing to remove: still a new view (as PyTorch's), not this handle, so that a hook
  // or retain_grad() on the result sees the gradient through it alone.
  if (dim() == 0 || sizes()[d] != 1) return reshape(sizes());
  Shape sz = sizes();
  sz.erase(sz.begin() + d);
  return reshape(sz);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sz = sizes();
  sz.insert(sz.begin() + d, 1);
  return reshape(sz);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) {  // its one element, named by dim 0 or -1 (as PyTorch's)
    wrap_dim(start_dim, 1, "flatten");
    wrap_dim(end_dim, 1, "flatten");
    return reshape({1});
  }
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  ZT_CHECK(start_dim <= end_dim, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim,
           " of ", shape_str(sizes()));
  Shape sz;
  for (int64_t i = 0; i < start_dim; ++i) sz.push_back(sizes()[i]);
  int64_t m = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) m *= sizes()[i];
  sz.push_back(m);
  for (int64_t i = end_dim + 1; i < dim(); ++i) sz.push_back(sizes()[i]);
  return reshape(sz);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

// ---------------------------------------------------------------- copies

Tensor Tensor::clone() const {
  Tensor out = Tensor::empty(sizes(), dtype(), device());
  {
    autograd::NoGradGuard ng;
    out.copy_(*this);
  }
  if (autograd::needs_grad_of(*this))
    autograd::record("clone", {*this}, {out},
                     [](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  return out;
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  Tensor out = Tensor::empty(sizes(), dt, device());
  out.copy_(detach());  // the copy is not recorded: the node below is
  if (is_floating(dt) && is_floating(dtype()) && autograd::needs_grad_of(*this)) {
    DType in_dt = dtype();
    autograd::record("to_dtype", {*this}, {out}, [in_dt](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].to(in_dt)};
    });
  }
  return out;
}

Tensor Tensor::to(Device dev) const {
  if (dev == device()) return *this;
  Tensor out = Tensor::empty(sizes(), dtype(), dev);
  out.copy_(detach());  // the copy is not recorded: the node below is
  Device in_dev = device();
  if (autograd::needs_grad_of(*this))
    autograd::record("to_device", {*this}, {out}, [in_dev](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].to(in_dev)};
    });
  return out;
}

const Tensor& Tensor::copy_(const Tensor& src) const {
  detail::check_write("copy_", *this, src);
  // In grad mode src requires no grad (checked), so expanding it records nothing.
  Tensor s = detail::broadcast_source("copy_", *this, src);
  detail::count_writes({*this});  // once src is known to fit
  // Onto the very same elements (a one-rank shard written from its own full value): nothing
  // to do, and a memcpy onto itself is undefined.
  if (has_storage() && s.has_storage() && storage() == s.storage() && offset() == s.offset() &&
      strides() == s.strides() && dtype() == s.dtype())
    return *this;
  if (device().type == s.device().type) {
    ZT_DISPATCH(device(), copy, *this, detail::unaliased_source(*this, s));
    return *this;
  }
#ifdef ZT_WITH_CUDA
  if (device().is_cuda()) {  // host -> device: stage a contiguous host copy in our dtype
    Tensor host = Tensor::empty(sizes(), dtype(), Device::cpu());
    cpu::copy(host, s);
    if (is_contiguous()) {
      cuda::memcpy_h2d(data_ptr(), host.data_ptr(), numel() * dtype_size(dtype()));
    } else {
      Tensor dev = Tensor::empty(sizes(), dtype(), device());
      cuda::memcpy_h2d(dev.data_ptr(), host.data_ptr(), numel() * dtype_size(dtype()));
      cuda::copy(*this, dev);
    }
    return *this;
  }
  // device -> host
  Tensor dev = s.is_contiguous() ? s : Tensor::empty(sizes(), s.dtype(), s.device());
  if (!s.is_contiguous()) cuda::copy(dev, s);
  Tensor host = Tensor::empty(sizes(), s.dtype(), Device::cpu());
  cuda::memcpy_d2h(host.data_ptr(), dev.data_ptr(), numel() * dtype_size(s.dtype()));
  cpu::copy(*this, host);
  return *this;
#else
  ZT_FAIL("copy between ", s.device().str(), " and ", device().str(), " needs a CUDA build of zt");
#endif
}

const Tensor& Tensor::fill_(double value) const {
  // An integer out of range (or NaN) would be an undefined conversion (PyTorch refuses it;
  // a fraction truncates, as there).
  const double lo = dtype() == DType::i64 ? -0x1p63 : -0x1p31;
  ZT_CHECK(is_floating(dtype()) || dtype() == DType::b8 || (value >= lo && value < -lo),
           "fill_: ", value, " cannot be converted to ", dtype_name(dtype()), " without overflow");
  detail::begin_write("fill_", *this);
  ZT_DISPATCH(device(), fill, *this, value);
  return *this;
}

// ---------------------------------------------------------------- autograd

const Tensor& Tensor::set_requires_grad(bool r) const {
  ZT_CHECK(is_leaf(),
           "set_requires_grad: only leaf tensors can be marked (this one is the "
           "output of '",
           impl_->grad_fn->name(), "'); use detach() first");
  ZT_CHECK(!r || is_floating(dtype()),
           "set_requires_grad: only floating tensors can require "
           "grad, got ",
           dtype_name(dtype()));
  impl_->requires_grad = r;
  return *this;
}

bool Tensor::is_leaf() const {
  return meta().grad_fn == nullptr;
}

Tensor Tensor::grad() const {
  return Tensor(meta().grad);
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined()) {
    // Backward adds into .grad() in place: refuse here what it could not add into, rather
    // than fail inside a later backward (as PyTorch, when a gradient is assigned).
    ZT_CHECK(g.sizes() == sizes(), "set_grad: gradient shape ", shape_str(g.sizes()),
             " does not match tensor shape ", shape_str(sizes()));
    const std::string self = str() + (name().empty() ? "" : " '" + name() + "'");
    ZT_CHECK(g.dtype() == dtype(), "set_grad: a gradient of dtype ", dtype_name(g.dtype()), " for ",
             self, "; it must have the tensor's dtype (convert with .to(dtype))");
    ZT_CHECK(g.device() == device(), "set_grad: a gradient on ", g.device().str(), " for ", self,
             "; it must be on the tensor's device (move it with .to(device))");
    ZT_CHECK(detail::elements_apart(g), "set_grad: the gradient ", g.str(),
             " has elements that share memory (strides ", shape_str(g.strides()),
             ": an expand()ed or as_strided() view), so backward could not add into it; pass "
             "a clone()");
  }
  meta().grad = g.impl_ptr();  // meta(): an undefined tensor is an error here too
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  autograd::backward({*this}, {grad}, retain_graph);
}

Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, int64_t offset) const {
  ZT_CHECK(has_storage(), "as_strided: the tensor has no storage");
  // It records no history (PyTorch's does): the view would carry no gradient to the tensor.
  ZT_CHECK(!requires_grad() || !autograd::grad_mode_enabled(), "as_strided: ", str(),
           " requires grad, while grad mode is on; as_strided records no autograd history, so "
           "no gradient would reach it through the view. Use view, narrow, select, permute or "
           "expand, or as_strided of a detach()ed tensor if no gradient should flow");
  ZT_CHECK(sizes.size() == strides.size(), "as_strided: ", sizes.size(), " sizes but ",
           strides.size(), " strides");
  int64_t last = offset;  // the furthest element the view reaches
  bool empty = false, overflow = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    ZT_CHECK(sizes[d] >= 0 && strides[d] >= 0, "as_strided: sizes ", shape_str(sizes),
             " and strides ", shape_str(strides), " must not be negative");
    empty = empty || sizes[d] == 0;
    int64_t reach = 0;
    if (sizes[d] > 0)
      overflow = overflow || __builtin_mul_overflow(sizes[d] - 1, strides[d], &reach) ||
                 __builtin_add_overflow(last, reach, &last);
  }
  const auto capacity =
      static_cast<int64_t>(impl_->storage->bytes() / static_cast<size_t>(dtype_size(dtype())));
  // An empty view may sit at the storage's end, not past it.
  ZT_CHECK(offset >= 0 && !overflow && (empty ? offset <= capacity : last < capacity),
           "as_strided: sizes ", shape_str(sizes), ", strides ", shape_str(strides),
           " from element ", offset, " reach past the storage's ", capacity, " elements");
  Tensor out = make_view(sizes, strides, offset);
  out.impl_->no_grad_view = false;
  out.impl_->view_base.reset();
  return out;
}

Tensor Tensor::detach() const {
  Tensor out = make_view(sizes(), strides(), offset());
  out.impl_->no_grad_view = false;
  out.impl_->view_base.reset();
  return out;
}

void Tensor::retain_grad() const {
  // It would get no gradient to keep, and .grad() would fail far from here (as PyTorch).
  ZT_CHECK(requires_grad(), "retain_grad on ", str(), name().empty() ? "" : " '" + name() + "'",
           ", which does not require grad: no gradient reaches it (computed under a "
           "NoGradGuard, or from tensors that require no grad?)");
  if (is_leaf()) return;
  if (impl_->retains_grad) return;
  impl_->retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_;
  impl_->grad_fn->retain_hooks.emplace_back(impl_->output_nr, [weak](const Tensor& g) {
    if (auto self = weak.lock()) {
      if (self->grad) {
        self->grad = add(Tensor(self->grad), g).impl_ptr();
      } else {
        self->grad = g.detach().clone().impl_ptr();
      }
    }
    return Tensor();
  });
}

int Tensor::register_hook(GradHook hook) const {
  ZT_CHECK(requires_grad(), "register_hook on a tensor that does not require grad");
  const int id = impl_->next_hook_id++;
  auto fn = std::make_shared<GradHook>(std::move(hook));
  if (is_leaf()) {
    impl_->leaf_hooks.push_back({.id = id, .fn = std::move(fn)});
  } else {
    impl_->grad_fn->pre_hooks.push_back(
        {.output_nr = impl_->output_nr, .id = id, .fn = std::move(fn)});
  }
  return id;
}

void Tensor::remove_hook(int id) const {
  if (is_leaf()) {
    std::erase_if(impl_->leaf_hooks, [id](const auto& h) { return h.id == id; });
  } else {
    std::erase_if(impl_->grad_fn->pre_hooks, [&](const autograd::PreHook& h) {
      return h.output_nr == impl_->output_nr && h.id == id;
    });
  }
}

int Tensor::register_post_accumulate_grad_hook(PostAccumulateHook hook) const {
  ZT_CHECK(is_leaf() && requires_grad(),
           "register_post_accumulate_grad_hook: only for leaves that require grad");
  const int id = impl_->next_hook_id++;
  impl_->post_accumulate_hooks.push_back(
      {.id = id, .fn = std::make_shared<PostAccumulateHook>(std::move(hook))});
  return id;
}

void Tensor::remove_post_accumulate_grad_hook(int id) const {
  std::erase_if(meta().post_accumulate_hooks, [id](const auto& h) { return h.id == id; });
}

}  // namespace zt
