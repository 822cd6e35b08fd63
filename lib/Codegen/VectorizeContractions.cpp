//===- VectorizeContractions.cpp - register-tiled vector contractions -----===//
//
// Rewrites each `out += a * b` linalg.generic on static buffers (matmuls,
// convolutions, their tiles in vertex kernels) into a register-tiled loop
// nest of vector FMAs: a tile of U x C vector accumulators (U positions of
// one output loop, C vectors along the output's last dimension) is loaded
// once, accumulates over every reduction iteration in registers, and is
// stored once. The operand that varies along the output row is loaded as a
// vector (contiguously, or gathered for a strided convolution) and shared by
// the U rows; the other is a scalar broadcast. This is the structure of a
// hand-written GEMM micro-kernel (and of poplibs' convolution vertices);
// LLVM's own vectorizer, given the scalar loop nest, keeps one accumulator
// in memory and vectorizes only the innermost loop.
//
// A vertex kernel generic over its piece's shape (one kernel for every
// piece of an op, and every op of the same body and maps) has loops of
// dynamic range and buffers of dynamic strides. A dynamic row loop runs
// blocks of the tile's rows, the last one's rows past the end clamped to
// the last row and not stored; a dynamic column loop runs full tiles, then
// the columns left a masked vector at a time; the addresses take the
// strides the buffers carry. Each output element still sums its terms in
// the op's order, so the results are those of a kernel specialised to the
// piece's shape.
//
//===----------------------------------------------------------------------===//

#include "tessera/Codegen/Passes.h"
#include "tessera/Codegen/VectorizeContractions.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/DenseMap.h"

#include <functional>
#include <limits>

namespace tessera {
#define GEN_PASS_DEF_VECTORIZECONTRACTIONS
#include "tessera/Codegen/Passes.h.inc"
} // namespace tessera

using namespace mlir;

namespace {

/// Vector registers' width the tiles are sized for by default (AVX-512);
/// the pass's vector-bits sets it.
constexpr int64_t kDefaultVectorBits = 512;
/// Accumulators a tile may hold, and rows (U) it may span.
constexpr int64_t kMaxAccumulators = 16;
constexpr int64_t kMaxRows = 8;

/// A loop range, coefficient or size known only at run time.
constexpr int64_t kDynamic = ShapedType::kDynamic;

/// An operand index expression as sum_l coeffs[l] * loop_l + constant.
struct LinearExpr {
  SmallVector<int64_t> coeffs;
  int64_t constant = 0;
};

std::optional<LinearExpr> linearize(AffineExpr e, unsigned numLoops) {
  LinearExpr r;
  r.coeffs.assign(numLoops, 0);
  if (auto d = dyn_cast<AffineDimExpr>(e)) {
    r.coeffs[d.getPosition()] = 1;
    return r;
  }
  if (auto c = dyn_cast<AffineConstantExpr>(e)) {
    r.constant = c.getValue();
    return r;
  }
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return std::nullopt;
  auto lhs = linearize(bin.getLHS(), numLoops);
  auto rhs = linearize(bin.getRHS(), numLoops);
  if (!lhs || !rhs)
    return std::nullopt;
  if (e.getKind() == AffineExprKind::Add) {
    for (unsigned l = 0; l < numLoops; ++l)
      r.coeffs[l] = lhs->coeffs[l] + rhs->coeffs[l];
    r.constant = lhs->constant + rhs->constant;
    return r;
  }
  if (e.getKind() == AffineExprKind::Mul) {
    auto isConst = [](const LinearExpr &x) {
      return llvm::all_of(x.coeffs, [](int64_t c) { return c == 0; });
    };
    const LinearExpr *k = isConst(*rhs)   ? &*rhs
                          : isConst(*lhs) ? &*lhs
                                          : nullptr;
    const LinearExpr *x = k == &*rhs ? &*lhs : &*rhs;
    if (!k)
      return std::nullopt;
    for (unsigned l = 0; l < numLoops; ++l)
      r.coeffs[l] = x->coeffs[l] * k->constant;
    r.constant = x->constant * k->constant;
    return r;
  }
  return std::nullopt;
}

/// How an input is read inside the tile.
enum class Access {
  Broadcast,  ///< does not vary along the output row: a scalar, broadcast
  Contiguous, ///< the row is consecutive elements: a vector load
  Strided,    ///< every s-th element, s small: a wider load and a shuffle
  Gather,     ///< every s-th element, s large: a gather
};

/// Widest load (elements) a strided row is read with before shuffling out
/// its lanes; beyond it a gather is cheaper.
constexpr int64_t kMaxStridedLoad = 64;

/// An input read with stride s along the tile's row, through a copy split
/// into phases: each row of its last dimension (W elements) becomes s runs,
/// elements p, p + s, p + 2s, ... for phase p, each H = ceil(W / s) long. A
/// stride-s convolution's row of outputs then reads one run contiguously:
/// x = s * w + r lands at (r mod s) * H + r floordiv s + w. The copy costs
/// one pass over the input; the shuffles it saves are one per vector load.
struct PhaseSplit {
  int64_t stride = 0;     ///< s
  int64_t width = 0;      ///< W, the buffer's last dimension
  int64_t phaseWidth = 0; ///< H
  int64_t rows = 0;       ///< the buffer's elements / W
  /// r: the position in the row, less the row loop's s * w (reduction
  /// loops only: a convolution's window column).
  LinearExpr within;
};

/// A buffer addressed linearly: element sum_l coeffs[l] * loop_l + constant
/// of its storage from its offset (every dimension's stride folded in).
struct Operand {
  Value buffer;
  /// A coefficient (or the constant) is kDynamic where a stride it takes is
  /// known only at run time (a dimension of dynamic size inside it); the
  /// emitter computes it from `dims` and the buffer's strides.
  LinearExpr address;
  int64_t span = 0; ///< elements from the first to one past the last (or kDynamic)
  /// The map's expression of each dimension of the buffer, for the
  /// coefficients that are kDynamic.
  SmallVector<LinearExpr> dims;
  /// The last dimension's index (its stride is 1), and whether the storage
  /// is dense row-major: what splitting into phases needs.
  LinearExpr last;
  bool rowMajor = false;
  /// Set when the operand is read through a copy split into phases; then
  /// `address` and `span` are the copy's, plus the phase term of `within`.
  std::optional<PhaseSplit> phases;
};

struct Input : Operand {
  Access access = Access::Broadcast;
  /// Stored narrower than the accumulators (fp16 or bf16 summed in f32, an
  /// fp16.32 contraction's `extf` in the body): loaded as such, then widened.
  bool widened = false;
  /// Whether it varies with each of the tile's row loops.
  SmallVector<bool, 2> alongRows;
};

/// How a term joins the accumulator.
enum class Combine {
  MultiplyAdd, ///< out + lhs * rhs (a vector FMA)
  Add,         ///< out + lhs (a sum: partial sums of a split reduction)
  Maximum,     ///< maximumf(out, lhs) (max pooling), NaN-propagating
  Minimum,     ///< minimumf(out, lhs)
};

/// A reduction `out = combine(out, term)` and the tile chosen for it.
struct Plan {
  linalg::GenericOp op;
  Combine combine = Combine::MultiplyAdd;
  SmallVector<int64_t> ranges;
  SmallVector<unsigned> reductionLoops, outerLoops;
  Input lhs, rhs;
  Operand out;
  VectorType vectorType;
  int64_t lanes = 0; ///< VL
  int64_t vectorBits = kDefaultVectorBits;
  unsigned colLoop = 0;
  /// The tile's row loops and the rows it spans in each (U = their
  /// product): a loop the vector operands do not vary with, then one the
  /// broadcast operands do not vary with.
  SmallVector<unsigned, 2> rowLoops;
  SmallVector<int64_t, 2> rowTiles;
  int64_t chunks = 1; ///< C
  /// The op just before that sets every output element before the
  /// reduction adds to it -- a fill or a copy -- and is folded into the
  /// accumulators' first values instead of its own pass over the output.
  Operation *initializer = nullptr;
  Value initValue;   ///< a fill's scalar
  Operand initFrom;  ///< a copy's source, addressed like the output
  int64_t stackBytes = 0; ///< what the phase-split copies take
};

/// Fills `o` for the buffer `v` read through `map`: needs an affine-linear
/// map, and strides that are static or (a dense buffer with dimensions of
/// dynamic size) follow from its shape. A tensor (foldsFillIntoAccumulators'
/// question) is taken as the dense buffer it bufferizes to: a slice's
/// strides differ, but stay static, or dynamic alike.
bool addressLinearly(Value v, AffineMap map, unsigned numLoops, Operand &o) {
  auto type = dyn_cast<ShapedType>(v.getType());
  if (!type || !type.hasRank())
    return false;
  SmallVector<int64_t> strides;
  if (auto memref = dyn_cast<MemRefType>(type)) {
    int64_t offset;
    if (failed(memref.getStridesAndOffset(strides, offset)) ||
        llvm::any_of(strides, [](int64_t s) { return !ShapedType::isDynamic(s) && s < 0; }) ||
        (!memref.getLayout().isIdentity() &&
         llvm::any_of(strides, [](int64_t s) { return ShapedType::isDynamic(s); })))
      return false;
  } else if (isa<RankedTensorType>(type)) {
    strides.assign(type.getRank(), 1);
    for (int64_t d = type.getRank() - 2; d >= 0; --d)
      strides[d] = ShapedType::isDynamic(strides[d + 1]) ||
                           type.isDynamicDim(d + 1)
                       ? kDynamic
                       : strides[d + 1] * type.getDimSize(d + 1);
  } else {
    return false;
  }
  o.buffer = v;
  o.address.coeffs.assign(numLoops, 0);
  o.span = 1;
  for (auto [d, e] : llvm::enumerate(map.getResults())) {
    auto lin = linearize(e, numLoops);
    if (!lin || llvm::any_of(lin->coeffs, [](int64_t c) { return c < 0; }))
      return false;
    bool dynamicStride = ShapedType::isDynamic(strides[d]);
    for (unsigned l = 0; l < numLoops; ++l)
      if (lin->coeffs[l] != 0)
        o.address.coeffs[l] = dynamicStride || o.address.coeffs[l] == kDynamic
                                  ? kDynamic
                                  : o.address.coeffs[l] + lin->coeffs[l] * strides[d];
    if (lin->constant != 0)
      o.address.constant = dynamicStride || o.address.constant == kDynamic
                               ? kDynamic
                               : o.address.constant + lin->constant * strides[d];
    // A dimension of size 1 adds nothing to the span, whatever its stride.
    if (type.isDynamicDim(d) || type.getDimSize(d) != 1)
      o.span = dynamicStride || type.isDynamicDim(d) || o.span == kDynamic
                   ? kDynamic
                   : o.span + (type.getDimSize(d) - 1) * strides[d];
    o.dims.push_back(*lin);
    if (d + 1 == map.getNumResults())
      o.last = *lin;
  }
  int64_t dense = 1;
  // Only a buffer of static shape is split into phases (its copy is sized
  // on the stack).
  o.rowMajor = type.getRank() > 0 && type.hasStaticShape();
  for (int64_t d = type.getRank() - 1; d >= 0 && o.rowMajor; --d) {
    o.rowMajor &= strides[d] == dense;
    dense *= type.getDimSize(d);
  }
  return true;
}

/// Merges loops every operand addresses as one run: loop `a` (outer) and `b`
/// (inner) with coeff[a] == coeff[b] * range[b] in every operand become one
/// loop of range[a] * range[b] at b's place (a 1x1 convolution's output rows
/// and columns: rows of 28 instead of 2). Reduction loops merge only with
/// the next one in the op's order, which keeps every output element's sum
/// in its order.
void collapseLoops(Plan &p, ArrayRef<utils::IteratorType> iterators) {
  SmallVector<Operand *> operands{&p.out, &p.lhs, &p.rhs};
  unsigned numLoops = p.ranges.size();
  auto nextReduction = [&](unsigned a) -> std::optional<unsigned> {
    for (unsigned c = a + 1; c < numLoops; ++c)
      if (iterators[c] == utils::IteratorType::reduction &&
          (ShapedType::isDynamic(p.ranges[c]) || p.ranges[c] > 1))
        return c;
    return std::nullopt;
  };
  for (bool merged = true; merged;) {
    merged = false;
    for (unsigned a = 0; a < numLoops && !merged; ++a)
      for (unsigned b = 0; b < numLoops && !merged; ++b) {
        if (a == b || iterators[a] != iterators[b] || ShapedType::isDynamic(p.ranges[a]) ||
            ShapedType::isDynamic(p.ranges[b]) || p.ranges[a] < 2 || p.ranges[b] < 2)
          continue;
        if (iterators[a] == utils::IteratorType::reduction &&
            nextReduction(a) != b)
          continue;
        if (!llvm::all_of(operands, [&](Operand *o) {
              return o->address.coeffs[a] != kDynamic && o->address.coeffs[b] != kDynamic &&
                     o->address.coeffs[a] == o->address.coeffs[b] * p.ranges[b];
            }))
          continue;
        p.ranges[b] *= p.ranges[a];
        p.ranges[a] = 1;
        for (Operand *o : operands)
          o->address.coeffs[a] = 0;
        merged = true;
      }
  }
}

/// The block argument `v` is of input number `i` (not the output).
std::optional<unsigned> inputArg(linalg::GenericOp op, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != op.getBody() ||
      arg.getArgNumber() >= static_cast<unsigned>(op.getNumDpsInputs()))
    return std::nullopt;
  return arg.getArgNumber();
}

/// `v` itself, or the value `extf` widens when `v` is one in `body` used
/// only there; and whether it was.
std::pair<Value, bool> unwiden(Value v, Block *body) {
  auto ext = v.getDefiningOp<arith::ExtFOp>();
  if (!ext || ext->getBlock() != body || !ext->hasOneUse())
    return {v, false};
  return {ext.getIn(), true};
}

/// The accumulating op of `op`'s body and the term it adds to the output
/// element: `yield combine(out, term)` (either operand order).
struct Accumulation {
  Combine combine;
  Value term;
};
std::optional<Accumulation> accumulation(linalg::GenericOp op) {
  Block *body = op.getBody();
  auto yield = dyn_cast<linalg::YieldOp>(body->getTerminator());
  if (!yield || yield.getNumOperands() != 1)
    return std::nullopt;
  Operation *last = yield.getOperand(0).getDefiningOp();
  if (!last || last->getBlock() != body || last->getNumOperands() != 2)
    return std::nullopt;
  std::optional<Combine> combine;
  if (isa<arith::AddFOp>(last))
    combine = Combine::Add;
  else if (isa<arith::MaximumFOp>(last))
    combine = Combine::Maximum;
  else if (isa<arith::MinimumFOp>(last))
    combine = Combine::Minimum;
  Value outArg = body->getArguments().back();
  Value term = last->getOperand(0) == outArg   ? last->getOperand(1)
               : last->getOperand(1) == outArg ? last->getOperand(0)
                                               : Value();
  if (!combine || !term || term == outArg)
    return std::nullopt;
  return Accumulation{*combine, term};
}

/// Whether the op writes every element of its output exactly once per
/// reduction pass: the output map is a permutation of the parallel loops
/// whose ranges are the output's shape.
bool coversOutput(linalg::GenericOp op, ArrayRef<int64_t> ranges) {
  OpOperand *init = op.getDpsInitOperand(0);
  AffineMap map = op.getMatchingIndexingMap(init);
  auto type = cast<ShapedType>(init->get().getType());
  if (!map.isProjectedPermutation() ||
      map.getNumResults() != static_cast<unsigned>(type.getRank()))
    return false;
  auto iterators = op.getIteratorTypesArray();
  unsigned parallel = 0;
  for (auto [d, e] : llvm::enumerate(map.getResults())) {
    unsigned l = cast<AffineDimExpr>(e).getPosition();
    if (iterators[l] != utils::IteratorType::parallel ||
        ranges[l] != type.getDimSize(d))
      return false;
  }
  for (auto it : iterators)
    parallel += it == utils::IteratorType::parallel;
  return parallel == map.getNumResults();
}

/// Whether `op` may take its output's initial value from an op before it:
/// it writes its whole output once per reduction pass and does not read it
/// as an input.
bool initializesOwnOutput(linalg::GenericOp op, ArrayRef<int64_t> ranges) {
  return coversOutput(op, ranges) &&
         !llvm::is_contained(op.getDpsInputs(), op.getDpsInitOperand(0)->get());
}

/// Finds the fill or copy right before `p.op` that only initializes its
/// output (same buffer, nothing in between), to fold into the accumulators.
/// A copy's source must be laid out like the output.
void findInitializer(Plan &p) {
  Operation *prev = p.op->getPrevNode();
  Value out = p.op.getDpsInitOperand(0)->get();
  if (!prev || !initializesOwnOutput(p.op, p.ranges))
    return;
  if (auto fill = dyn_cast<linalg::FillOp>(prev)) {
    if (fill.hasPureBufferSemantics() && fill.getDpsInitOperand(0)->get() == out &&
        fill.getInputs()[0].getType() == getElementTypeOrSelf(out.getType())) {
      p.initializer = prev;
      p.initValue = fill.getInputs()[0];
    }
    return;
  }
  Value source;
  if (auto copy = dyn_cast<linalg::CopyOp>(prev)) {
    if (copy.hasPureBufferSemantics() && copy.getDpsInitOperand(0)->get() == out)
      source = copy.getInputs()[0];
  } else if (auto copy = dyn_cast<memref::CopyOp>(prev)) {
    if (copy.getTarget() == out)
      source = copy.getSource();
  }
  if (!source || source == out)
    return;
  auto from = cast<MemRefType>(source.getType());
  auto to = cast<MemRefType>(out.getType());
  SmallVector<int64_t> fromStrides, toStrides;
  int64_t fromOffset, toOffset;
  if (from.getShape() != to.getShape() || from.getElementType() != to.getElementType() ||
      failed(from.getStridesAndOffset(fromStrides, fromOffset)) ||
      failed(to.getStridesAndOffset(toStrides, toOffset)) || fromStrides != toStrides ||
      (!from.hasStaticShape() && !(from.getLayout().isIdentity() && to.getLayout().isIdentity())))
    return;
  p.initializer = prev;
  p.initFrom.buffer = source;
}

/// An input's elements each take part in at least this many of the op's
/// iterations for its phase-split copy to pay: the copy is ~0.1 vector
/// instructions per element, each shuffle it saves serves a tile row.
constexpr int64_t kMinPhaseSplitReuse = 16;
/// The largest phase-split copy (bytes, on the stack) and stride, and the
/// most stack one function's copies take (the host reference code runs
/// every op of a model in one function, on the caller's stack).
constexpr int64_t kMaxPhaseSplitBytes = 64 * 1024;
constexpr int64_t kMaxPhaseSplitStride = 4;
constexpr int64_t kMaxPhaseSplitBytesPerFunction = 256 * 1024;

/// Reads input `in`, strided along the tile's row, through a copy split into
/// phases (see PhaseSplit) when its storage is dense row-major, only
/// reduction loops join the row loop in placing an element within its row,
/// and the op reuses each element enough to pay for the copy. `ranges` are
/// the loop ranges before collapseLoops: a merged loop cannot take part.
/// `stackLeft`: the bytes the function's copies may still take.
void splitPhases(Plan &p, Input &in, ArrayRef<utils::IteratorType> iterators,
                 ArrayRef<int64_t> ranges, int64_t stackLeft) {
  int64_t s = in.address.coeffs[p.colLoop];
  if (llvm::any_of(p.ranges, [](int64_t r) { return ShapedType::isDynamic(r); }))
    return;
  if ((in.access != Access::Strided && in.access != Access::Gather) || !in.rowMajor ||
      s > kMaxPhaseSplitStride || in.last.coeffs[p.colLoop] != s)
    return;
  auto type = cast<ShapedType>(in.buffer.getType());
  int64_t width = type.getShape().back();
  unsigned numLoops = p.ranges.size();
  int64_t iterations = 1;
  for (unsigned l = 0; l < numLoops; ++l) {
    iterations *= p.ranges[l];
    bool placesInRow = in.last.coeffs[l] != 0;
    if (placesInRow && (p.ranges[l] != ranges[l] ||
                        (l != p.colLoop && iterators[l] != utils::IteratorType::reduction)))
      return;
    if ((in.address.coeffs[l] - in.last.coeffs[l]) % width != 0)
      return;
  }
  if ((in.address.constant - in.last.constant) % width != 0)
    return;
  PhaseSplit split;
  split.stride = s;
  split.width = width;
  split.phaseWidth = llvm::divideCeil(width, s);
  split.rows = type.getNumElements() / width;
  int64_t rowLength = s * split.phaseWidth;
  int64_t bytes = split.rows * rowLength * type.getElementTypeBitWidth() / 8;
  if (bytes > kMaxPhaseSplitBytes || p.stackBytes + bytes > stackLeft ||
      iterations < kMinPhaseSplitReuse * split.rows * width)
    return;
  p.stackBytes += bytes;
  split.within = in.last;
  split.within.coeffs[p.colLoop] = 0;
  // Whole rows move from W to s x H elements apart; the row loop steps one
  // element of its phase.
  for (unsigned l = 0; l < numLoops; ++l)
    in.address.coeffs[l] =
        l == p.colLoop ? 1 : (in.address.coeffs[l] - in.last.coeffs[l]) / width * rowLength;
  in.address.constant = (in.address.constant - in.last.constant) / width * rowLength;
  in.span = split.rows * rowLength;
  in.access = Access::Contiguous;
  in.phases = std::move(split);
}

/// Recognizes `out = combine(out, a [* b])` reductions on static buffers of
/// f32/f64/f16 (matmuls, convolutions, partial-sum combines, max pooling) and
/// plans their tiles. The factors of a product may be narrower floats
/// widened in the body (`extf`: fp16 operands, f32 partials).
std::optional<Plan> planContraction(linalg::GenericOp op, int64_t stackLeft,
                                    int64_t vectorBits = kDefaultVectorBits) {
  if (!(op.hasPureBufferSemantics() || op.hasPureTensorSemantics()) || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() == 0)
    return std::nullopt;
  std::optional<Accumulation> acc = accumulation(op);
  if (!acc)
    return std::nullopt;
  std::optional<unsigned> a, b;
  bool widenA = false, widenB = false;
  Block *body = op.getBody();
  auto mul = acc->term.getDefiningOp<arith::MulFOp>();
  if (acc->combine == Combine::Add && mul && mul->getBlock() == body &&
      mul.getResult().hasOneUse()) {
    acc->combine = Combine::MultiplyAdd;
    auto [lhsValue, lhsWidened] = unwiden(mul.getLhs(), body);
    auto [rhsValue, rhsWidened] = unwiden(mul.getRhs(), body);
    widenA = lhsWidened, widenB = rhsWidened;
    a = inputArg(op, lhsValue);
    b = inputArg(op, rhsValue);
    // The multiply, the add, the yield and the widenings: nothing else.
    if (!a || !b || body->getOperations().size() != 3u + widenA + widenB ||
        (widenA && widenB && lhsValue == rhsValue))
      return std::nullopt;
  } else {
    a = inputArg(op, acc->term);
    if (!a || body->getOperations().size() != 2)
      return std::nullopt;
  }

  Plan p;
  p.op = op;
  p.combine = acc->combine;
  p.ranges = op.getStaticLoopRanges();
  unsigned numLoops = p.ranges.size();
  if (llvm::any_of(p.ranges, [](int64_t r) { return !ShapedType::isDynamic(r) && r <= 0; }))
    return std::nullopt;
  // A dynamic range plans as a long one (the emitter clamps the last block
  // of rows and masks the last columns).
  auto extent = [&](unsigned l) {
    return ShapedType::isDynamic(p.ranges[l]) ? std::numeric_limits<int32_t>::max()
                                              : p.ranges[l];
  };
  OpOperand *init = op.getDpsInitOperand(0);
  Type element = getElementTypeOrSelf(init->get().getType());
  if (!(element.isF32() || element.isF64() || element.isF16()) ||
      !addressLinearly(init->get(), op.getMatchingIndexingMap(init), numLoops,
                       p.out))
    return std::nullopt;
  auto input = [&](unsigned i, bool widened, Input &in) {
    OpOperand *operand = op.getDpsInputOperand(i);
    Type stored = getElementTypeOrSelf(operand->get().getType());
    in.widened = widened;
    return (widened ? isa<Float16Type, BFloat16Type>(stored) : stored == element) &&
           addressLinearly(operand->get(), op.getMatchingIndexingMap(operand),
                           numLoops, in);
  };
  if (!input(*a, widenA, p.lhs))
    return std::nullopt;
  // A plain reduction has one input: `rhs` stands for it as well, so the
  // code below treats both operands alike.
  if (!b)
    p.rhs = p.lhs;
  else if (!input(*b, widenB, p.rhs))
    return std::nullopt;

  auto iterators = op.getIteratorTypesArray();
  findInitializer(p);
  collapseLoops(p, iterators);
  // A copy's source has the output's strides: it is addressed alike.
  if (p.initFrom.buffer) {
    p.initFrom.address = p.out.address;
    p.initFrom.span = p.out.span;
  }

  // The vectors run along the output loop whose elements are consecutive in
  // the output (usually its last dimension; the one before when the last is
  // a unit dimension).
  bool found = false;
  for (unsigned l = 0; l < numLoops && !found; ++l)
    if (iterators[l] == utils::IteratorType::parallel &&
        p.out.address.coeffs[l] == 1 && extent(l) >= 2) {
      p.colLoop = l;
      found = true;
    }
  if (!found)
    return std::nullopt;
  p.vectorBits = vectorBits;
  p.lanes = std::min<int64_t>(vectorBits / element.getIntOrFloatBitWidth(),
                              llvm::PowerOf2Ceil(extent(p.colLoop)));
  for (Input *in : {&p.lhs, &p.rhs}) {
    int64_t stride = in->address.coeffs[p.colLoop];
    // Lanes a stride apart known only at run time: left to the loops.
    if (stride == kDynamic)
      return std::nullopt;
    in->access = stride == 0                           ? Access::Broadcast
                 : stride == 1                         ? Access::Contiguous
                 : stride * p.lanes <= kMaxStridedLoad ? Access::Strided
                                                       : Access::Gather;
    splitPhases(p, *in, iterators, op.getStaticLoopRanges(), stackLeft);
  }

  p.vectorType = VectorType::get({p.lanes}, element);

  // The tile's rows: an output loop the row-vector operands do not vary
  // with (each loaded vector then serves every row), the longest such.
  auto varies = [&](const Input &in, unsigned loop) {
    return in.address.coeffs[loop] != 0;
  };
  auto isRowCandidate = [&](unsigned l) {
    return iterators[l] == utils::IteratorType::parallel && l != p.colLoop &&
           extent(l) >= 2 && !llvm::is_contained(p.rowLoops, l);
  };
  int64_t best = -1;
  unsigned rowLoop = 0;
  for (unsigned l = 0; l < numLoops; ++l) {
    if (!isRowCandidate(l))
      continue;
    bool reuses = (p.lhs.access == Access::Broadcast || !varies(p.lhs, l)) &&
                  (p.rhs.access == Access::Broadcast || !varies(p.rhs, l));
    int64_t score =
        (reuses ? 1 << 20 : 0) + std::min<int64_t>(extent(l), kMaxRows);
    if (score > best) {
      best = score;
      rowLoop = l;
    }
  }
  int64_t rows = 1;
  if (best >= 0) {
    p.rowLoops.push_back(rowLoop);
    rows = std::min<int64_t>(extent(rowLoop), kMaxRows);
    p.rowTiles.push_back(rows);
  }
  int64_t columnChunks = llvm::divideCeil(extent(p.colLoop), p.lanes);
  p.chunks = std::clamp<int64_t>(kMaxAccumulators / rows, 1, columnChunks);
  // Accumulators to spare (a convolution's 6 output channels of one vector
  // each): a second row loop, one the broadcast operands do not vary with
  // (the output rows), so each broadcast scalar serves more accumulators
  // and more FMAs are independent.
  int64_t spare = kMaxAccumulators / (rows * p.chunks);
  if (!p.rowLoops.empty() && spare >= 2) {
    best = -1;
    for (unsigned l = 0; l < numLoops; ++l) {
      if (!isRowCandidate(l))
        continue;
      bool reuses = (p.lhs.access != Access::Broadcast || !varies(p.lhs, l)) &&
                    (p.rhs.access != Access::Broadcast || !varies(p.rhs, l));
      if (reuses && extent(l) > best) {
        best = extent(l);
        rowLoop = l;
      }
    }
    if (best >= 0) {
      p.rowLoops.push_back(rowLoop);
      p.rowTiles.push_back(std::min<int64_t>(extent(rowLoop), spare));
    }
  }
  for (Input *in : {&p.lhs, &p.rhs})
    for (unsigned l : p.rowLoops)
      in->alongRows.push_back(varies(*in, l));

  for (unsigned l = 0; l < numLoops; ++l) {
    if (iterators[l] == utils::IteratorType::reduction)
      p.reductionLoops.push_back(l);
    else if (l != p.colLoop && !llvm::is_contained(p.rowLoops, l))
      p.outerLoops.push_back(l);
  }
  return p;
}

/// Emits the loop nest of one planned contraction in place of its op.
class Emitter {
public:
  Emitter(OpBuilder &b, const Plan &p)
      : b(b), p(p), loc(p.op->getLoc()), loops(p.ranges.size()) {}

  void emit() {
    // Ranges and strides known only at run time, read once before the loops.
    linalg::LinalgOp op = p.op; // a handle of our own: createLoopRanges is not const
    if (llvm::any_of(p.ranges, [](int64_t r) { return ShapedType::isDynamic(r); }))
      for (auto [l, range] : llvm::enumerate(op.createLoopRanges(b, loc)))
        if (ShapedType::isDynamic(p.ranges[l]))
          dynamicRanges[l] = getValueOrCreateConstantIndexOp(b, loc, range.size);
    for (const Operand *o : {&p.out, static_cast<const Operand *>(&p.lhs),
                             static_cast<const Operand *>(&p.rhs)})
      addDynamicAddress(*o);
    if (p.initFrom.buffer)
      initFrom = flatten(p.initFrom);
    out = flatten(p.out);
    lhs = p.lhs.phases ? splitCopy(p.lhs) : flatten(p.lhs);
    // One copy serves both operands of `x * x`, split alike or not at all.
    bool same = p.rhs.buffer == p.lhs.buffer &&
                (p.rhs.phases ? p.rhs.phases->stride : 0) ==
                    (p.lhs.phases ? p.lhs.phases->stride : 0);
    rhs = same ? lhs : p.rhs.phases ? splitCopy(p.rhs) : flatten(p.rhs);
    outer(0);
  }

private:
  OpBuilder &b;
  const Plan &p;
  Location loc;
  /// The current value of every loop (an induction variable or a constant).
  SmallVector<OpFoldResult> loops;
  /// The operands' storage as 1-D buffers, addressed by Operand::address.
  Value out, lhs, rhs, initFrom;
  /// The dynamic loop ranges, by loop.
  llvm::DenseMap<unsigned, Value> dynamicRanges;
  /// An operand's coefficients (by loop; null where static) and constant
  /// that are kDynamic in its address, computed from its buffer's strides.
  struct DynamicAddress {
    SmallVector<Value> coeffs;
    Value constant;
  };
  llvm::DenseMap<const Operand *, DynamicAddress> dynamicAddresses;

  /// Loop `l`'s range: a constant, or its value at run time.
  OpFoldResult range(unsigned l) {
    if (ShapedType::isDynamic(p.ranges[l]))
      return dynamicRanges.lookup(l);
    return b.getIndexAttr(p.ranges[l]);
  }

  /// Computes `o`'s kDynamic coefficients: sum over its dimensions of the
  /// map's coefficient times the dimension's stride.
  void addDynamicAddress(const Operand &o) {
    bool dynamic = o.address.constant == kDynamic ||
                   llvm::is_contained(o.address.coeffs, kDynamic);
    if (!dynamic)
      return;
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, o.buffer);
    DynamicAddress &a = dynamicAddresses[&o];
    a.coeffs.assign(o.address.coeffs.size(), Value());
    auto sum = [&](auto termOf) {
      Value total = index(0);
      for (auto [d, dim] : llvm::enumerate(o.dims))
        if (int64_t c = termOf(dim); c != 0)
          total = arith::AddIOp::create(
              b, loc, total,
              arith::MulIOp::create(b, loc, metadata.getStrides()[d], index(c)));
      return total;
    };
    for (auto [l, c] : llvm::enumerate(o.address.coeffs))
      if (c == kDynamic)
        a.coeffs[l] = sum([&](const LinearExpr &e) { return e.coeffs[l]; });
    if (o.address.constant == kDynamic)
      a.constant = sum([](const LinearExpr &e) { return e.constant; });
  }

  Value flatten(const Operand &o) {
    if (o.span != kDynamic)
      return flatten(o.buffer, b.getIndexAttr(o.span));
    // Elements from the first to one past the last: 1 + sum (size - 1) x stride.
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, o.buffer);
    Value span = index(1);
    for (auto [size, stride] : llvm::zip(metadata.getSizes(), metadata.getStrides()))
      span = arith::AddIOp::create(
          b, loc, span,
          arith::MulIOp::create(b, loc, arith::SubIOp::create(b, loc, size, index(1)), stride));
    return flatten(o.buffer, span);
  }

  /// `buffer`'s storage as a 1-D buffer of `span` elements.
  Value flatten(Value buffer, OpFoldResult span) {
    auto type = cast<MemRefType>(buffer.getType());
    SmallVector<int64_t> strides;
    int64_t staticOffset;
    (void)type.getStridesAndOffset(strides, staticOffset);
    OpFoldResult offset = b.getIndexAttr(staticOffset);
    if (ShapedType::isDynamic(staticOffset))
      offset = memref::ExtractStridedMetadataOp::create(b, loc, buffer)
                   .getOffset();
    auto layout = StridedLayoutAttr::get(b.getContext(), staticOffset, {1});
    std::optional<int64_t> staticSpan = getConstantIntValue(span);
    auto flatType = MemRefType::get({staticSpan ? *staticSpan : kDynamic},
                                    type.getElementType(), layout);
    return memref::ReinterpretCastOp::create(b, loc, flatType, buffer, offset,
                                             ArrayRef<OpFoldResult>{span},
                                             ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  }

  /// Input `o`'s phase-split copy (see PhaseSplit), in a stack buffer: per
  /// row, a masked load of s x L elements, then each phase's L lanes
  /// shuffled out and stored (L: a full vector, or the phase's length if
  /// shorter).
  Value splitCopy(const Operand &o) {
    const PhaseSplit &split = *o.phases;
    int64_t s = split.stride, width = split.width, h = split.phaseWidth;
    Type element = getElementTypeOrSelf(o.buffer.getType());
    Value source = flatten(o.buffer, b.getIndexAttr(split.rows * width));
    Value copy;
    {
      // At the function's entry, so that an op in a loop does not grow the
      // stack per iteration; the pass bounds each function's copies.
      OpBuilder::InsertionGuard guard(b);
      Region *body = p.op->getParentOfType<FunctionOpInterface>().getCallableRegion();
      b.setInsertionPointToStart(&body->front());
      copy = memref::AllocaOp::create(b, loc,
                                      MemRefType::get({split.rows * s * h}, element));
    }
    int64_t lanes = std::min<int64_t>(p.vectorBits / element.getIntOrFloatBitWidth(),
                                      llvm::PowerOf2Ceil(h));
    auto narrow = VectorType::get({lanes}, element);
    auto wide = VectorType::get({s * lanes}, element);
    Value zero = zeros(wide);
    auto at = [&](Value row, int64_t rowLength, int64_t k) {
      AffineExpr q = b.getAffineDimExpr(0);
      return getValueOrCreateConstantIndexOp(
          b, loc,
          affine::makeComposedFoldedAffineApply(
              b, loc, AffineMap::get(1, 0, q * rowLength + k), {OpFoldResult(row)}));
    };
    auto maskOf = [&](VectorType type, int64_t n) {
      return vector::ConstantMaskOp::create(
          b, loc, VectorType::get(type.getShape(), b.getI1Type()), ArrayRef<int64_t>{n});
    };
    forRange(0, split.rows, 1, [&](Value row) {
      for (int64_t j0 = 0; j0 < h; j0 += lanes) {
        int64_t n = std::min(width - s * j0, s * lanes);
        Value loaded = vector::MaskedLoadOp::create(
            b, loc, wide, source, ValueRange{at(row, width, s * j0)}, maskOf(wide, n), zero);
        for (int64_t phase = 0; phase < s; ++phase) {
          int64_t count = std::clamp<int64_t>(
              llvm::divideCeil(width - phase, s) - j0, 0, lanes);
          if (count == 0)
            continue;
          SmallVector<int64_t> pick;
          for (int64_t i = 0; i < lanes; ++i)
            pick.push_back(i * s + phase);
          Value run = vector::ShuffleOp::create(b, loc, loaded, loaded, pick);
          Value to = at(row, s * h, phase * h + j0);
          if (count == lanes)
            vector::StoreOp::create(b, loc, run, copy, ValueRange{to});
          else
            vector::MaskedStoreOp::create(b, loc, copy, ValueRange{to},
                                          maskOf(narrow, count), run);
        }
      }
    });
    return copy;
  }

  /// The element of `o` at the current loop values.
  SmallVector<Value, 1> address(const Operand &o) {
    AffineExpr e = b.getAffineConstantExpr(o.address.constant == kDynamic ? 0 : o.address.constant);
    for (auto [l, c] : llvm::enumerate(o.address.coeffs))
      if (c != 0 && c != kDynamic)
        e = e + b.getAffineDimExpr(l) * c;
    if (o.phases) {
      // Position r in the source row: phase r mod s, r floordiv s into it.
      const PhaseSplit &split = *o.phases;
      AffineExpr r = b.getAffineConstantExpr(split.within.constant);
      for (auto [l, c] : llvm::enumerate(split.within.coeffs))
        if (c != 0)
          r = r + b.getAffineDimExpr(l) * c;
      e = e + (r % split.stride) * split.phaseWidth + r.floorDiv(split.stride);
    }
    OpFoldResult v = affine::makeComposedFoldedAffineApply(
        b, loc, AffineMap::get(loops.size(), 0, e), loops);
    Value at = getValueOrCreateConstantIndexOp(b, loc, v);
    // The terms of strides known only at run time.
    auto dynamic = dynamicAddresses.find(&o);
    if (dynamic == dynamicAddresses.end())
      return {at};
    for (auto [l, coeff] : llvm::enumerate(dynamic->second.coeffs))
      if (coeff && getConstantIntValue(loops[l]) != 0)
        at = arith::AddIOp::create(
            b, loc, at,
            arith::MulIOp::create(b, loc, coeff,
                                  getValueOrCreateConstantIndexOp(b, loc, loops[l])));
    if (dynamic->second.constant)
      at = arith::AddIOp::create(b, loc, at, dynamic->second.constant);
    return {at};
  }

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  /// A counted loop [lo, hi) step `step` whose body gets the induction
  /// variable; a single iteration is inlined.
  void forRange(int64_t lo, int64_t hi, int64_t step,
                const std::function<void(Value)> &fn) {
    if (hi - lo <= step) {
      fn(index(lo));
      return;
    }
    forRange(index(lo), index(hi), step, fn);
  }

  /// A loop [lo, hi) step `step`, its bounds values (a range known only at
  /// run time).
  void forRange(Value lo, Value hi, int64_t step, const std::function<void(Value)> &fn) {
    scf::ForOp::create(b, loc, lo, hi, index(step), ValueRange{},
                       [&](OpBuilder &nested, Location, Value iv, ValueRange) {
                         OpBuilder::InsertionGuard guard(b);
                         b.setInsertionPointToStart(nested.getInsertionBlock());
                         fn(iv);
                         scf::YieldOp::create(b, loc);
                       });
  }

  /// Parallel loops outside the tile, then the tiles over rows and columns.
  void outer(size_t i) {
    if (i < p.outerLoops.size()) {
      unsigned l = p.outerLoops[i];
      auto body = [&](Value iv) {
        loops[l] = iv;
        outer(i + 1);
      };
      if (ShapedType::isDynamic(p.ranges[l]))
        forRange(index(0), getValueOrCreateConstantIndexOp(b, loc, range(l)), 1, body);
      else
        forRange(0, p.ranges[l], 1, body);
      return;
    }
    rowBlocks(0, Rows());
  }

  /// A tile's rows: where its block of each row loop starts and how many
  /// rows it spans there. Row r of the tile is position r, row-major, of
  /// the blocks' grid.
  struct Rows {
    SmallVector<Value, 2> starts;
    SmallVector<int64_t, 2> counts;
    /// A row loop's range where it is known only at run time (else null):
    /// its last block may pass the end, and rows past it are clamped to
    /// the last row to read, and not stored.
    SmallVector<Value, 2> limits;
    int64_t size() const {
      int64_t n = 1;
      for (int64_t c : counts)
        n *= c;
      return n;
    }
    /// Row r's position in row loop k's block.
    int64_t position(int64_t r, size_t k) const {
      int64_t stride = 1;
      for (size_t j = k + 1; j < counts.size(); ++j)
        stride *= counts[j];
      return r / stride % counts[k];
    }
  };

  /// Blocks of each row loop in turn -- full ones in a loop, then the
  /// remainder -- and the column tiles in each.
  void rowBlocks(size_t k, const Rows &rows) {
    if (k == p.rowLoops.size()) {
      columns(rows);
      return;
    }
    int64_t range = p.ranges[p.rowLoops[k]], u = p.rowTiles[k];
    auto next = [&](Value start, int64_t count, Value limit = Value()) {
      Rows inner = rows;
      inner.starts.push_back(start);
      inner.counts.push_back(count);
      inner.limits.push_back(limit);
      rowBlocks(k + 1, inner);
    };
    if (ShapedType::isDynamic(range)) {
      // Blocks of u rows, the last clamped: one tile body, with as many
      // independent accumulators for a short last block as for a full one
      // (a row at a time, a tile's one or two accumulators made its FMAs
      // wait on each other).
      Value end = getValueOrCreateConstantIndexOp(b, loc, this->range(p.rowLoops[k]));
      forRange(index(0), end, u, [&](Value r0) { next(r0, u, end); });
      return;
    }
    int64_t full = range / u * u;
    if (full > 0)
      forRange(0, full, u, [&](Value r0) { next(r0, u); });
    if (range > full)
      next(index(full), range - full);
  }

  void columns(const Rows &rows) {
    int64_t range = p.ranges[p.colLoop];
    int64_t block = p.chunks * p.lanes;
    if (ShapedType::isDynamic(range)) {
      // Full tiles of C vectors, unmasked; then the rest a vector at a
      // time (each still a tile of every row's accumulator), masked to the
      // lanes left: no lanes computed past the end but in the last vector.
      Value end = getValueOrCreateConstantIndexOp(b, loc, this->range(p.colLoop));
      AffineExpr c = b.getAffineDimExpr(0), e = b.getAffineDimExpr(1);
      Value full = getValueOrCreateConstantIndexOp(
          b, loc,
          affine::makeComposedFoldedAffineApply(
              b, loc, AffineMap::get(1, 0, c.floorDiv(block) * block), {OpFoldResult(end)}));
      forRange(index(0), full, block, [&](Value c0) {
        tile(rows, c0, SmallVector<int64_t>(p.chunks, p.lanes));
      });
      forRange(full, end, p.lanes, [&](Value c0) {
        lanesLeft = affine::AffineMinOp::create(
            b, loc, AffineMap::get(2, 0, {e - c, b.getAffineConstantExpr(p.lanes)}, b.getContext()),
            ValueRange{c0, end});
        tile(rows, c0, {kDynamicLanes});
        lanesLeft = Value();
      });
      return;
    }
    int64_t full = range / block * block;
    if (full > 0)
      forRange(0, full, block, [&](Value c0) {
        tile(rows, c0, SmallVector<int64_t>(p.chunks, p.lanes));
      });
    if (range > full) {
      SmallVector<int64_t> lanes;
      for (int64_t left = range - full; left > 0; left -= p.lanes)
        lanes.push_back(std::min(left, p.lanes));
      tile(rows, index(full), lanes);
    }
  }

  OpFoldResult plus(Value v, int64_t k) {
    AffineExpr d = b.getAffineDimExpr(0);
    return affine::makeComposedFoldedAffineApply(
        b, loc, AffineMap::get(1, 0, d + k), {OpFoldResult(v)});
  }

  /// Sets the row and column loops to tile position (row, chunk); a row
  /// past a dynamic row loop's end reads its last row.
  void at(const Rows &rows, int64_t row, Value col0, int64_t chunk) {
    for (size_t k = 0; k < p.rowLoops.size(); ++k) {
      int64_t position = rows.position(row, k);
      if (Value limit = rows.limits[k]) {
        AffineExpr d = b.getAffineDimExpr(0), end = b.getAffineDimExpr(1);
        loops[p.rowLoops[k]] = affine::AffineMinOp::create(
                                   b, loc,
                                   AffineMap::get(2, 0, {d + position, end - 1}, b.getContext()),
                                   ValueRange{rows.starts[k], limit})
                                   .getResult();
      } else {
        loops[p.rowLoops[k]] = plus(rows.starts[k], position);
      }
    }
    loops[p.colLoop] = plus(col0, chunk * p.lanes);
  }

  /// Whether tile row `row` is within every dynamic row loop's range (null
  /// when no row loop is dynamic).
  Value rowInRange(const Rows &rows, int64_t row) {
    Value inRange;
    for (size_t k = 0; k < p.rowLoops.size(); ++k) {
      Value limit = rows.limits[k];
      if (!limit)
        continue;
      Value position = getValueOrCreateConstantIndexOp(
          b, loc, plus(rows.starts[k], rows.position(row, k)));
      Value below =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, position, limit);
      inRange = inRange ? arith::AndIOp::create(b, loc, inRange, below).getResult() : below;
    }
    return inRange;
  }

  /// A vector's lanes in use: a count, or kDynamicLanes for `lanesLeft`
  /// (a dynamic column loop's last vectors, one per tile: the lanes left,
  /// at most a vector).
  static constexpr int64_t kDynamicLanes = -1;
  Value lanesLeft;

  /// A mask of `type`'s shape with its first `lanes` set.
  Value mask(VectorType type, int64_t lanes) {
    auto maskType = VectorType::get(type.getShape(), b.getI1Type());
    if (lanes == kDynamicLanes)
      return vector::CreateMaskOp::create(b, loc, maskType, ValueRange{lanesLeft});
    return vector::ConstantMaskOp::create(b, loc, maskType, ArrayRef<int64_t>{lanes});
  }
  Value mask(int64_t lanes) { return mask(p.vectorType, lanes); }
  Value zeros(VectorType type) {
    return arith::ConstantOp::create(b, loc, cast<TypedAttr>(b.getZeroAttr(type)));
  }
  Value zeros() { return zeros(p.vectorType); }

  /// A vector of `in`'s lanes at the current loop values, in the
  /// accumulators' type.
  Value load(const Input &in, Value buffer, int64_t lanes) {
    Value v = loadStored(in, buffer, lanes);
    return in.widened ? Value(arith::ExtFOp::create(b, loc, p.vectorType, v)) : v;
  }

  /// The same in the type `buffer` stores.
  Value loadStored(const Input &in, Value buffer, int64_t lanes) {
    SmallVector<Value, 1> idx = address(in);
    Type stored = getElementTypeOrSelf(buffer.getType());
    auto type = VectorType::get({p.lanes}, stored);
    switch (in.access) {
    case Access::Broadcast:
      return vector::BroadcastOp::create(
          b, loc, type, memref::LoadOp::create(b, loc, buffer, idx));
    case Access::Contiguous:
      if (lanes == p.lanes)
        return vector::LoadOp::create(b, loc, type, buffer, idx);
      return vector::MaskedLoadOp::create(b, loc, type, buffer, idx, mask(lanes),
                                          zeros(type));
    case Access::Strided: {
      // Lanes i * s of a load of s x lanes elements, masked to end at the
      // last lane's element (the row may end the buffer).
      int64_t s = in.address.coeffs[p.colLoop];
      auto wide = VectorType::get({s * p.lanes}, stored);
      Value m;
      if (lanes == kDynamicLanes) {
        AffineExpr n = b.getAffineDimExpr(0);
        Value count = affine::AffineApplyOp::create(b, loc, AffineMap::get(1, 0, (n - 1) * s + 1),
                                                    ValueRange{lanesLeft});
        m = vector::CreateMaskOp::create(
            b, loc, VectorType::get({s * p.lanes}, b.getI1Type()), ValueRange{count});
      } else {
        m = mask(wide, (lanes - 1) * s + 1);
      }
      Value row =
          vector::MaskedLoadOp::create(b, loc, wide, buffer, idx, m, zeros(wide));
      SmallVector<int64_t> pick;
      for (int64_t i = 0; i < p.lanes; ++i)
        pick.push_back(i * s);
      return vector::ShuffleOp::create(b, loc, row, row, pick);
    }
    case Access::Gather: {
      SmallVector<int32_t> offsets;
      for (int64_t i = 0; i < p.lanes; ++i)
        offsets.push_back(
            static_cast<int32_t>(i * in.address.coeffs[p.colLoop]));
      auto offsetType = VectorType::get({p.lanes}, b.getI32Type());
      Value offsetVector = arith::ConstantOp::create(
          b, loc, offsetType,
          DenseElementsAttr::get(offsetType, ArrayRef(offsets)));
      return vector::GatherOp::create(b, loc, type, buffer, idx, offsetVector,
                                      mask(lanes), zeros(type));
    }
    }
    llvm_unreachable("access kind");
  }

  /// One tile: its rows, one vector per entry of `lanes` from col0 (the
  /// last may be partial).
  void tile(const Rows &rows, Value col0, ArrayRef<int64_t> lanes) {
    int64_t chunks = lanes.size();
    SmallVector<Value> acc;
    for (int64_t r = 0; r < rows.size(); ++r)
      for (int64_t c = 0; c < chunks; ++c) {
        if (p.initValue) {
          acc.push_back(vector::BroadcastOp::create(b, loc, p.vectorType, p.initValue));
          continue;
        }
        at(rows, r, col0, c);
        SmallVector<Value, 1> idx = address(p.out);
        Value from = p.initFrom.buffer ? initFrom : out;
        acc.push_back(
            lanes[c] == p.lanes
                ? Value(vector::LoadOp::create(b, loc, p.vectorType, from, idx))
                : Value(vector::MaskedLoadOp::create(b, loc, p.vectorType, from,
                                                     idx, mask(lanes[c]),
                                                     zeros())));
      }
    acc = reduce(0, acc, rows, col0, lanes);
    for (int64_t r = 0; r < rows.size(); ++r) {
      // A row past a dynamic row loop's end (clamped to its last) is not
      // stored.
      std::optional<OpBuilder::InsertionGuard> guard;
      if (Value inRange = rowInRange(rows, r)) {
        auto ifInRange = scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/false);
        guard.emplace(b);
        b.setInsertionPointToStart(ifInRange.thenBlock());
      }
      for (int64_t c = 0; c < chunks; ++c) {
        at(rows, r, col0, c);
        SmallVector<Value, 1> idx = address(p.out);
        Value v = acc[r * chunks + c];
        if (lanes[c] == p.lanes)
          vector::StoreOp::create(b, loc, v, out, idx);
        else
          vector::MaskedStoreOp::create(b, loc, out, idx, mask(lanes[c]), v);
      }
    }
  }

  /// The reduction loops, in the op's order, carrying the accumulators.
  SmallVector<Value> reduce(size_t i, SmallVector<Value> acc, const Rows &rows,
                            Value col0, ArrayRef<int64_t> lanes) {
    if (i == p.reductionLoops.size())
      return multiplyAccumulate(acc, rows, col0, lanes);
    unsigned l = p.reductionLoops[i];
    if (p.ranges[l] == 1) {
      loops[l] = b.getIndexAttr(0);
      return reduce(i + 1, acc, rows, col0, lanes);
    }
    auto loop = scf::ForOp::create(
        b, loc, index(0), getValueOrCreateConstantIndexOp(b, loc, range(l)), index(1), acc,
        [&](OpBuilder &nested, Location, Value iv, ValueRange carried) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(nested.getInsertionBlock());
          loops[l] = iv;
          SmallVector<Value> next =
              reduce(i + 1, SmallVector<Value>(carried), rows, col0, lanes);
          scf::YieldOp::create(b, loc, next);
        });
    return SmallVector<Value>(loop.getResults());
  }

  SmallVector<Value> multiplyAccumulate(SmallVector<Value> acc, const Rows &rows,
                                        Value col0, ArrayRef<int64_t> lanes) {
    int64_t chunks = lanes.size();
    // Each operand is loaded once per (row, chunk) it varies with: rows at
    // the same positions in the row loops it varies along share a value.
    auto rowKey = [&](const Input &in, int64_t r) {
      int64_t key = 0;
      for (size_t k = 0; k < rows.counts.size(); ++k)
        key = key * rows.counts[k] + (in.alongRows[k] ? rows.position(r, k) : 0);
      return key;
    };
    struct Loaded {
      llvm::DenseMap<int64_t, int64_t> slotOfKey;
      SmallVector<Value> values;
    };
    auto operands = [&](const Input &in, Value buffer) {
      bool byColumn = in.access != Access::Broadcast;
      Loaded l;
      for (int64_t r = 0; r < rows.size(); ++r) {
        if (!l.slotOfKey.try_emplace(rowKey(in, r), l.slotOfKey.size()).second)
          continue;
        for (int64_t c = 0; c < (byColumn ? chunks : 1); ++c) {
          at(rows, r, col0, c);
          l.values.push_back(load(in, buffer, lanes[c]));
        }
      }
      return l;
    };
    bool product = p.combine == Combine::MultiplyAdd;
    Loaded lhsValues = operands(p.lhs, lhs);
    Loaded rhsValues = product ? operands(p.rhs, rhs) : Loaded();
    auto pick = [&](const Input &in, const Loaded &l, int64_t r, int64_t c) {
      int64_t cols = in.access != Access::Broadcast ? chunks : 1;
      return l.values[l.slotOfKey.lookup(rowKey(in, r)) * cols + (cols > 1 ? c : 0)];
    };
    for (int64_t r = 0; r < rows.size(); ++r)
      for (int64_t c = 0; c < chunks; ++c) {
        Value &a = acc[r * chunks + c];
        Value term = pick(p.lhs, lhsValues, r, c);
        switch (p.combine) {
        case Combine::MultiplyAdd:
          // fp16 partial sums (fp16.16) round the product and then the sum,
          // as the op's body does: an FMA would round once.
          if (p.vectorType.getElementType().isF16())
            a = arith::AddFOp::create(
                b, loc, a, arith::MulFOp::create(b, loc, term, pick(p.rhs, rhsValues, r, c)));
          else
            a = vector::FMAOp::create(b, loc, term, pick(p.rhs, rhsValues, r, c), a);
          break;
        case Combine::Add:
          a = arith::AddFOp::create(b, loc, a, term);
          break;
        case Combine::Maximum:
          a = arith::MaximumFOp::create(b, loc, a, term);
          break;
        case Combine::Minimum:
          a = arith::MinimumFOp::create(b, loc, a, term);
          break;
        }
      }
    return acc;
  }
};

struct VectorizeContractions
    : tessera::impl::VectorizeContractionsBase<VectorizeContractions> {
  using Base::Base;
  void runOnOperation() override {
    if (vectorBits < 64 || vectorBits > 2048 || !llvm::isPowerOf2_64(vectorBits)) {
      getOperation().emitError("codegen-vectorize-contractions: vector-bits=")
          << vectorBits.getValue() << " is not a power of two from 64 to 2048";
      return signalPassFailure();
    }
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) { ops.push_back(op); });
    OpBuilder b(&getContext());
    llvm::DenseMap<Operation *, int64_t> stackUsed; // per function
    for (linalg::GenericOp op : ops) {
      if (!op.hasPureBufferSemantics())
        continue;
      // No stack for copies outside a function.
      Operation *function = op->getParentOfType<FunctionOpInterface>();
      int64_t stackLeft =
          function ? kMaxPhaseSplitBytesPerFunction - stackUsed[function] : 0;
      std::optional<Plan> plan = planContraction(op, stackLeft, vectorBits);
      if (!plan)
        continue;
      if (function)
        stackUsed[function] += plan->stackBytes;
      b.setInsertionPoint(op);
      Emitter(b, *plan).emit();
      op.erase();
      if (plan->initializer)
        plan->initializer->erase();
    }
  }
};

} // namespace

bool tessera::codegen::foldsFillIntoAccumulators(linalg::GenericOp op) {
  // What findInitializer asks of the op besides the fill being just before it.
  return planContraction(op, /*stackLeft=*/0).has_value() &&
         initializesOwnOutput(op, op.getStaticLoopRanges());
}
