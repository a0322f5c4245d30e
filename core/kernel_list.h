// The entries of the device kernel table (core/kernels.h), written once: kernels.h
// includes this file inside namespace zt::cpu and again inside zt::cuda, so both devices
// declare the same kernels, in this order, under this documentation. Each section names
// its two source files, core/cpu/<file>.cpp and core/cuda/<file>.cu (or .cpp).
//
// No include guard: the repeated inclusion is the point. Include core/kernels.h instead.

// ---------------------------------------------------------------- elementwise
// cpu/elementwise.cpp, cuda/elementwise.cu. Inputs may be strided.

/// out = op(in) with the op's parameters p0, p1 (see UnaryOp); floating dtypes.
void unary(UnaryOp op, const Tensor& out, const Tensor& in, double p0, double p1);
/// out = op(a, b); comparisons take any dtype and write bool, the rest are floating.
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
/// out = a + alpha * b (b broadcast to out's shape); out may alias a.
void axpy(const Tensor& out, const Tensor& a, const Tensor& b, double alpha);
/// out = cond ? a : b, cond bool.
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
/// out = a + value * b * c over out's shape (a, b, c broadcast views of it), floating
/// dtypes, 16-bit values computed in f32 and rounded once at the end: the product, scaled,
/// then the sum, each rounded to the computing type (f32, f64), which for those gives a mul
/// then an add's bits (a GPU may fuse them into one FMA); for 16-bit ones it is closer.
void addcmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, double value);
/// dst (any strides) <- src (same shape, any strides and dtype), both on this device.
void copy(const Tensor& dst, const Tensor& src);
/// Many copies in one call, for the ZeRO engine's packing of buckets and gathered
/// parameters: for each i, dst[i] = src[i] converted as copy converts, or with
/// accumulate, dst[i] = dst[i] + that value, added in acc_t of dst's dtype as axpy adds
/// (so the bits of add_(dst[i], src[i].to(dst's dtype))). Pairs are contiguous, of one
/// numel each (empty ones skipped), on this device; every dst has one dtype and every src
/// one dtype, both floating, or (copies only) one non-floating dtype on both sides; no dst
/// overlaps another dst or any src. CUDA: one launch per kMultiCopyPerLaunch (96) pairs,
/// their pointers passed as kernel arguments (nothing is uploaded, so a CUDA graph
/// captures it as is).
void multi_copy(const std::vector<Tensor>& dst, const std::vector<Tensor>& src, bool accumulate);
/// Every element of dst (any strides) = value.
void fill(const Tensor& dst, double value);
/// Sum of `in` over its last `inner` elements per row: in viewed as (rows, inner).
void sum_rows(const Tensor& out, const Tensor& in, int64_t rows, int64_t inner);

// ---------------------------------------------------------------- matrix multiply
// cpu/gemm.cpp (BLAS), cuda/gemm.cpp (cuBLAS), cuda/gemm_lt.cpp (cuBLASLt: gemm_epilogue)
// and cuda/gemm_epilogue.cu (gemm_epilogue_backward).

/// C = alpha op(A) op(B) + beta C, row-major with leading dimensions lda, ldb, ldc;
/// f32, f64, bf16 and f16 (the 16-bit types accumulate in fp32).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb, double beta, const Tensor& c,
          int64_t ldc);
/// `batch` GEMMs at once: C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch. a, b, c
/// are (batch, M, K), (batch, K, N) and (batch, M, N) views as gemm's a, b, c are 2-D
/// ones; matrix i starts stride_a / stride_b / stride_c elements after matrix i - 1
/// (A's and B's strides may be 0 to reuse one matrix; C's matrices must not overlap).
void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                  const Tensor& a, int64_t lda, int64_t stride_a, const Tensor& b, int64_t ldb,
                  int64_t stride_b, double beta, const Tensor& c, int64_t ldc, int64_t stride_c,
                  int64_t batch);
/// A linear layer's GEMM with its epilogue fused: pre (m, n) = op(A) op(B) + bias, with
/// bias (n, contiguous) broadcast over the rows (undefined: none); then out = pre, or,
/// when gelu, out = the tanh-approximation GELU of pre (UnaryOp::kGeluTanh's formula)
/// and aux = pre, which the backward needs (aux undefined when not gelu). A and B are row-major
/// with leading dimensions lda, ldb as in gemm; out and aux are contiguous (m, n); k > 0. f32, f64,
/// bf16 and f16; the 16-bit types accumulate, add the bias and apply GELU in fp32 and round once
/// (aux too). CUDA runs one cublasLtMatmul (BIAS or GELU_AUX_BIAS epilogue) where cuBLASLt takes
/// the problem, else gemm and the elementwise kernels.
void gemm_epilogue(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const Tensor& a,
                   int64_t lda, const Tensor& b, int64_t ldb, const Tensor& bias, bool gelu,
                   const Tensor& out, const Tensor& aux);
/// gemm_epilogue's backward through its epilogue, for dy (m, n) contiguous: when gelu,
/// dpre (m, n) = dy * gelu_tanh'(aux) (BinaryOp::kGeluTanhGrad's formula), else dpre is
/// dy itself and not written; dbias (n, undefined: skipped) = the column sums of dpre
/// (as stored, in out's dtype), accumulated in double in a fixed order: on the CPU the
/// order of sum_rows (so equal to sum(dpre, {0})), on CUDA row chunks combined in order.
void gemm_epilogue_backward(int64_t m, int64_t n, const Tensor& dy, const Tensor& aux, bool gelu,
                            const Tensor& dpre, const Tensor& dbias);

// ---------------------------------------------------------------- random
// cpu/random.cpp, cuda/random.cu: the same numbers on both devices (core/rng.h).

/// Fills a contiguous floating `out` from Philox stream positions [offset, offset +
/// numel) of seed: uniform in [a, b), or normal with mean a and standard deviation b.
/// Values are computed in double and stored through float for f32 and 16-bit dtypes.
void random_fill(const Tensor& out, uint64_t seed, uint64_t offset, bool normal, double a,
                 double b);

// ---------------------------------------------------------------- convolution
// cpu/conv.cpp (vol2col + GEMM, Winograd), cuda/conv.cu (cuDNN). See ConvGeometry for
// the legend. Tensors contiguous, one dtype: f32 or f64 (CUDA also bf16 and f16).
// Padding is symmetric on CUDA (the op pads asymmetric inputs first).

/// out (N, O, Do, Ho, Wo) = conv(x (N, C, D, H, W), weight (O, C/G, kd, kh, kw)) + bias (O)
/// with G = g.groups and g's dilations; bias may be undefined.
void conv_forward(const ConvGeometry& g, const Tensor& out, const Tensor& x, const Tensor& weight,
                  const Tensor& bias);
/// Gradients of conv_forward from grad_out (N, O, Do, Ho, Wo): grad_x like x,
/// grad_weight like weight, grad_bias (O). Each output may be undefined (not wanted);
/// defined outputs are contiguous and fully overwritten. x is read only for grad_weight
/// (otherwise only its shape and dtype are: conv_transpose passes grad_x for it).
void conv_backward(const ConvGeometry& g, const Tensor& grad_out, const Tensor& x,
                   const Tensor& weight, const Tensor& grad_x, const Tensor& grad_weight,
                   const Tensor& grad_bias);

// ---------------------------------------------------------------- normalization
// cpu/norm.cpp, cuda/norm.cu (GroupNorm, BatchNorm); cpu/layer_norm.cpp,
// cuda/layer_norm.cu (LayerNorm). Legend: N batch, C channels, S spatial elements per
// channel, G groups. Tensors contiguous, f32 or f64 (LayerNorm: also bf16 and f16);
// GroupNorm and BatchNorm statistics (mean, rstd) have the dtype of x. Sums accumulate
// in double (LayerNorm's statistics on CUDA: f32 or f64, and its parameter gradients' 16-byte
// path adds 8 rows' f32 products before its double sums); results do not depend on the
// thread count.

/// y, x (N, C, S); weight, bias (C) or undefined; mean, rstd (N, G) written.
/// Per (n, g): mean and 1 / sqrt(biased var + eps) over its C/G * S elements; then
/// n = xhat weight + bias and the epilogue (core/ops/norm.h; scale, shift contiguous
/// (N, C, S) or undefined): y = n scale + shift, then silu(y) if epi.silu.
void group_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const GroupNormEpilogue& epi,
                        int64_t N, int64_t C, int64_t S, int64_t G, double eps);
/// dy (the gradient of y), x (N, C, S); mean, rstd (N, G) from the forward; weight, bias
/// (C) or undefined; epi as in the forward. Writes each defined output: dx (N, C, S),
/// dweight (C), dbias (C), dscale and dshift (N, C, S).
void group_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dscale, const Tensor& dshift, const Tensor& dy,
                         const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, const Tensor& bias, const GroupNormEpilogue& epi,
                         int64_t N, int64_t C, int64_t S, int64_t G);
/// x (N, C, S) -> per-channel mean and rstd = 1 / sqrt(biased var + eps) (C, x's dtype),
/// over M = N * S elements, in double. running_mean and running_var (C, contiguous, one
/// floating dtype: any) or undefined: each becomes (1 - momentum) r + momentum stat, in
/// double, then converted to their dtype (16-bit ones through float, as copy converts),
/// the variance unbiased by M / (M - 1) (M > 1). counter (i64, one element) or undefined:
/// incremented by one where C > 0 (BatchNorm's num_batches_tracked).
void batch_norm_stats(const Tensor& mean, const Tensor& rstd, const Tensor& running_mean,
                      const Tensor& running_var, const Tensor& counter, const Tensor& x, int64_t N,
                      int64_t C, int64_t S, double eps, double momentum);
/// y = (x - mean[c]) * rstd[c] * weight[c] + bias[c]; x, y (N, C, S); mean, rstd (C);
/// weight, bias (C) or undefined.
void batch_norm_forward(const Tensor& y, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                        const Tensor& weight, const Tensor& bias, int64_t N, int64_t C, int64_t S);
/// Backward of batch_norm_forward. training: mean/rstd are the batch statistics and so
/// depend on x; otherwise they are constants (running statistics).
void batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t N, int64_t C, int64_t S, bool training);
/// LayerNorm over rows: x, y (rows, D) contiguous, f32, f64, bf16 or f16; weight, bias
/// (D) of x's dtype or undefined; mean, rstd (rows) written in f32 (f64 for f64 x), rstd
/// = 1 / sqrt(biased var + eps). y = (x - mean) rstd weight + bias is computed in f32 (f64
/// for f64) and rounded once to x's dtype. Each row is reduced in a fixed order (CPU: in
/// double, shifted by the row's first element; CUDA: two passes in f32 or f64, by one warp
/// per row where the row fits a warp's 16-byte loads, else one block per row), so results
/// do not depend on the thread count.
void layer_norm_forward(const Tensor& y, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t rows, int64_t D,
                        double eps);
/// Backward of layer_norm_forward: dy, x (rows, D) in x's dtype; mean, rstd from the
/// forward; weight (D) or undefined. Writes each defined output: dx (rows, D) in x's
/// dtype, dweight and dbias (D) in weight's dtype (x's when weight is undefined), summed
/// over rows in fixed blocks of rows whose partial sums are added in block order (no
/// atomics): the same bits whatever the thread count, run after run.
void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                         const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& weight, int64_t rows, int64_t D);

// ---------------------------------------------------------------- softmax and cross-entropy
// cpu/softmax.cpp, cuda/softmax.cu. Legend: (R, L, I) a tensor viewed as the rows
// before the softmax dim, the dim, and the elements after it; P positions, C classes.
// Tensors contiguous; softmax in f32 or f64 with the sum of exponentials in double (but
// for the GPU's cross-entropy partial sums, below).

/// Attention's softmax (cpu/attention.cpp, cuda/attention.cu): x, y (R, L) contiguous
/// f32 or f64 scores, y = softmax over L of scale * x. causal: R is a multiple of L and
/// row r is query r % L, whose keys l > r % L get y = 0 (no mask tensor). y may be x.
void attention_softmax_forward(const Tensor& y, const Tensor& x, int64_t R, int64_t L, double scale,
                               bool causal);
/// Fused attention (cpu/flash_attention.cpp, an emulation of cuda/flash_attention.cu;
/// the algorithm in cuda/flash_tiles.h): out = softmax(scale q k^T [causal]) v with no
/// Tq x Tk tensor. q, out (n0, n1, Tq, D), k, v (n0, n1, Tk, D), bf16 or f16, D one of
/// flash::head_dim_supported, the last dim contiguous, other strides multiples of 8
/// elements, data 16-byte aligned. lse (n0, n1, Tq) f32 contiguous receives each row's
/// log-sum-exp of the scaled visible scores.
void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, double scale, bool causal);
/// Its gradients dq, dk, dv (the layouts of q, k, v's rules) from the forward's out and
/// lse and the output gradient dout (out's rules); delta (n0, n1, Tq) f32 is scratch.
void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& delta, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& dout,
                              const Tensor& lse, double scale, bool causal);
/// x, y (R, L, I): softmax (or log-softmax) over L for every (r, i).
void softmax_forward(const Tensor& y, const Tensor& x, int64_t R, int64_t L, int64_t I, bool log);
/// dx from dy and the forward output y, all (R, L, I).
void softmax_backward(const Tensor& dx, const Tensor& dy, const Tensor& y, int64_t R, int64_t L,
                      int64_t I, bool log);
/// Fused cross-entropy forward, reading the logits once per row in their own dtype (no
/// log-probabilities are stored). logits (P, C) f32, f64, bf16 or f16; target (P) i64 or
/// i32; lse (P) f64 receives each kept row's log-sum-exp (0 on ignored and bad rows).
/// The max and exp(x - max) are computed in f32 (f64 for f64 logits), the loss sum in
/// double, and the row's sum of exponentials in double on the CPU; on the GPU each thread
/// adds the terms since its running max last grew in f32 (a few hundred at most for a
/// 50k vocabulary) and those partial sums in double, about 1e-7 relative from the CPU; each row and
/// the loss sum are reduced in a fixed order, so results do not depend on the thread count. stats
/// (3) f64 on this device receives {sum over kept rows of lse[p] - logits[p, t_p], the kept count,
/// the first position whose target is neither ignore_index nor in [0, C), or -1}: nothing is read
/// back, so the GPU does not synchronize (its kernel also reports a bad target as a device error,
/// core/cuda/device_error.h). CPU: rows in parallel, f32 exponentials by the SIMD exp of
/// cpu/lanes.h (about 1 ulp from std::exp); CUDA: one block per row with an online max and sum, one
/// read of it.
void cross_entropy_forward(const Tensor& stats, const Tensor& lse, const Tensor& logits,
                           const Tensor& target, int64_t ignore_index);
/// dlogits (P, C), the logits' dtype = (exp(logits - lse) - onehot(t)) * grad / count on
/// kept rows (computed in f32, f64 for f64 logits, and rounded once), 0 on ignored rows;
/// lse and stats (count = stats[1]) from cross_entropy_forward; grad: the loss gradient,
/// one f64 element on this device. Both are read there (no host synchronization). A bad
/// target's row (which the forward reported; its lse is 0) is 0, as an ignored one.
void cross_entropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& target, const Tensor& grad, const Tensor& stats,
                            int64_t ignore_index);

// ---------------------------------------------------------------- indexing
// cpu/index.cpp, cuda/index.cu. Tensors contiguous; indices i64 or i32. On the CPU they
// are already in range (the ops check with index_range); the CUDA kernels check each
// index themselves, report the first bad one (core/cuda/device_error.h) and stay in
// bounds, so the ops need no host synchronization there. Results are equal on both devices bit for
// bit: scatter-adds run per destination in source order, rounding after every add.

/// {min, max} of the index values (the GPU synchronizes); {0, -1} when empty.
std::array<int64_t, 2> index_range(const Tensor& index);
/// out (outer, n_idx, inner) = x (outer, n, inner)[:, index, :]; any dtype.
void index_rows(const Tensor& out, const Tensor& x, const Tensor& index, int64_t outer, int64_t n,
                int64_t inner);
/// dst (outer, n, inner) += src (outer, n_idx, inner) at rows index; floating dtypes. `op`
/// names the caller in errors; for kBincount the CUDA kernel reports an index out of range.
void index_rows_add(const Tensor& dst, const Tensor& src, const Tensor& index, int64_t outer,
                    int64_t n, int64_t inner, IndexAddOp op = IndexAddOp::kIndexSelectBackward);
/// offsets (index's shape, i64): element offsets into a contiguous x (x_sizes) of
/// gather(x, dim, index).
void gather_offsets(const Tensor& offsets, const Tensor& index, const Shape& x_sizes, int64_t dim);
/// out[i] = x[offsets[i]]; any dtype.
void take(const Tensor& out, const Tensor& x, const Tensor& offsets);
/// dst[offsets[i]] += src[i], in order of i; floating dtypes.
void put_add(const Tensor& dst, const Tensor& src, const Tensor& offsets);
/// out (ids..., classes) f32, already zero: out[i, ids[i]] = 1.
void one_hot(const Tensor& out, const Tensor& ids, int64_t classes);
/// out (rows) i64: index of the first max (or min) of each row of x (rows, n); a NaN
/// counts as both, the first NaN winning (PyTorch's rule). Any dtype.
void arg_extreme(const Tensor& out, const Tensor& x, int64_t rows, int64_t n, bool want_max);
/// Nearest resize of x (planes, D, H, W) to out (planes, Do, Ho, Wo) with PyTorch's
/// 'nearest' index rule; any dtype.
void nearest_forward(const Tensor& out, const Tensor& x, int64_t planes, const Shape& in_dhw,
                     const Shape& out_dhw);
/// gx (planes, D, H, W) = sum of gy (planes, Do, Ho, Wo) over the outputs that read
/// each input, in output order; floating dtypes.
void nearest_backward(const Tensor& gx, const Tensor& gy, int64_t planes, const Shape& in_dhw,
                      const Shape& out_dhw);

// ---------------------------------------------------------------- optimizer
// cpu/optim.cpp, cuda/optim.cu: fused optimizer steps that read and write every element
// once. One call updates a list of parameters (CUDA: one launch for the whole list, its
// table of {pointers, numel} uploaded on the stream). Entry i is parameter p[i], its
// gradient g[i] and its state slots, all contiguous, distinct (no aliasing), of p[i]'s
// numel and of one dtype for the whole call: f32 or f64. `low` is empty or has one entry
// per parameter: undefined, or a contiguous bf16/f16 tensor of p[i]'s numel (one dtype
// for the call) that receives the updated p[i] rounded to nearest even, as Tensor::to
// rounds. Constants come from the host as doubles and are cast once to the parameter
// type; the arithmetic runs in that type, each operation rounded on its own (the CUDA
// kernels use no fused multiply-add), so both devices give the same bits.
// `constants` (optional): a contiguous f64 tensor on p's device whose values replace
// the per-step arguments named below, read when the kernel runs. A captured CUDA graph
// (core/cuda/graph.h) replays with whatever was written there before each replay.

/// Adam/AdamW; m (exp_avg) and v (exp_avg_sq) updated in place:
///   gi = g + l2 p;  m = beta1 m + (1 - beta1) gi;  v = beta2 v + (1 - beta2) gi gi
///   p = p decay - step_size m / (sqrt(v) inv_sqrt_bc2 + eps)
/// (1 - beta is computed in the parameter type).
void adam_update(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                 const std::vector<Tensor>& m, const std::vector<Tensor>& v,
                 const std::vector<Tensor>& low, double beta1, double beta2, double l2,
                 double decay, double step_size, double inv_sqrt_bc2, double eps,
                 const Tensor& constants = Tensor());  // {l2, decay, step_size, inv_sqrt_bc2}
/// SGD; buf: the momentum buffers (one per parameter), or empty when momentum is 0:
///   d = g + weight_decay p
///   buf = first ? d : momentum buf + (1 - dampening) d;  d = nesterov ? d + momentum buf : buf
///   p = p - lr d
/// (1 - dampening is computed in double, then cast).
void sgd_update(const std::vector<Tensor>& p, const std::vector<Tensor>& g,
                const std::vector<Tensor>& buf, const std::vector<Tensor>& low, double lr,
                double momentum, double dampening, double weight_decay, bool nesterov, bool first,
                const Tensor& constants = Tensor());  // {lr, first (0 or 1)}

// ---------------------------------------------------------------- sum of squares
// cpu/sum_squares.cpp, cuda/sum_squares.cu: the gradient norm's reduction, read once
// with no temporary of the input's size.

/// out (one f64 element) = the sum over a contiguous floating x (f32, f64, bf16 or f16) of
/// x[i]^2, each element converted to double (16-bit ones through float) before squaring;
/// 0 when x is empty. CPU: one pass, eight double lanes over consecutive elements (lane
/// i % 8, the tail into lane 0), added in lane order at the end. CUDA: at most two
/// launches, per-thread double sums over a grid-stride loop, a fixed block tree, then
/// one block over the per-block sums; the grid depends only on the element count, so
/// repeated runs give the same bits, and nothing is read back or synchronized.
void sum_squares(const Tensor& out, const Tensor& x);
