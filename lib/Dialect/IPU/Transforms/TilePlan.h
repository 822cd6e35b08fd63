//===- TilePlan.h - what the tile planner and its rewrite share -*- C++ -*-===//
//
// ipu-plan-tiles decides how each linalg.generic of @main runs on the tiles
// and records it as an #ipu.plan; ipu-map-tiles applies the plans. Both see
// an op the same way: its loops, the regions each vertex reads of each
// input (`describe`), the elementwise reader it may absorb as an epilogue,
// the constant fill its vertices may do instead of a step of its own, and
// the cycles one of its vertices takes (through the target's CostModel).
// Those shared readings live here, private to the IPU transforms.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_DIALECT_IPU_TRANSFORMS_TILEPLAN_H
#define TESSERA_LIB_DIALECT_IPU_TRANSFORMS_TILEPLAN_H

#include "tessera/Dialect/IPU/Transforms/Passes.h"
#include "tessera/Target/CostModel.h"

#include <optional>
#include <utility>
#include <vector>

namespace tessera::ipu::tiling {

using mlir::AffineMap;
using mlir::LogicalResult;
using mlir::Operation;
using mlir::TypedAttr;
using mlir::Value;
using runtime::AccessMap;
using runtime::Box;
using runtime::TileMapping;
namespace linalg = mlir::linalg;

/// The module's @main, which tile mapping takes as one block of ops; an
/// error on the module (or @main) naming `pass` otherwise.
mlir::FailureOr<mlir::func::FuncOp> mainToMap(mlir::ModuleOp module, llvm::StringRef pass);

/// Bytes of one element of `t` (or of its elements): index is 8.
int64_t elementBytes(mlir::Type t);
/// `map` as an AccessMap; `full` (read whole) when it is not a box read.
AccessMap toAccessMap(AffineMap map);
/// The constant `op` fills its result with, when it only does that: no
/// tensor inputs, the init not read, a constant yielded (a reduction's
/// zeros, the identity of a split reduction's partials).
std::optional<mlir::arith::ConstantOp> constantFillValue(linalg::GenericOp op);
/// `map`, whose results index a tensor of shape `from`, indexing instead
/// its reshape to `to`, which only adds or drops unit dimensions.
AffineMap reshapedMap(AffineMap map, llvm::ArrayRef<int64_t> from, llvm::ArrayRef<int64_t> to);
/// Whether `a` and `b` hold the same dimensions but for unit ones.
bool differsByUnitDims(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);
/// The insert that pads a value with `fill`'s constant, when it can be a
/// padded view (virtual padding): `fill` fills the insert's destination and
/// nothing else, the insert writes its whole source at static offsets, and
/// only generics read the padded result, as inputs.
mlir::tensor::InsertSliceOp paddingInsertOf(linalg::GenericOp fill);
/// The reader of `result` (a reduction's) that can run as an epilogue of
/// the vertices computing it, and the unit-dimension reshape between them
/// if any; null when there is none (see the definition).
std::pair<linalg::GenericOp, Operation *> epilogueOf(linalg::GenericOp reduction,
                                                     Value result);
/// `mapping` seen through a reshape to `shape` that only adds or drops unit
/// dimensions: the same pieces on the same tiles.
TileMapping mappingThroughUnitDims(const TileMapping &mapping, llvm::ArrayRef<int64_t> shape);

/// An input of a compute set: an operand, or a tensor the body reads.
struct Input {
  Value value;
  AffineMap map; ///< in the generic's loops (a constant map for `full`)
  AccessMap access;
  bool captured = false; ///< read inside the body, not an operand
};

/// The operations of a generic's body, as the cost model weighs them:
/// those run per element, and those whose operands do not change along
/// the vertex's innermost loop (the output's last dimension, for ops
/// without reductions) and so run once per row. Constants, indices and
/// bitcasts (a register reinterpreted) count as none.
struct BodyOperations {
  int64_t elementSimple = 0, elementTranscendental = 0;
  int64_t rowSimple = 0, rowTranscendental = 0;
};

/// One linalg.generic as a compute set: what it reads and how (from the
/// op's structure), and the decisions of its plan (mapping, epilogue,
/// in-place init). The planner fills it while it decides; ipu-map-tiles
/// rebuilds it from the op and its #ipu.plan.
struct Plan {
  linalg::GenericOp op;
  std::vector<int64_t> loopRanges, outputLoops;
  std::vector<Input> inputs; ///< compute-set inputs, in order
  TileMapping mapping;       ///< of the results
  /// The generic whose only use is as this op's init: it takes this op's
  /// mapping and this op updates its result in place. When it only fills
  /// with a constant, it is no compute set of its own: each vertex of this
  /// op fills its output piece first (as poplibs' convolution vertices zero
  /// their partials), saving a step, its sync and a pass over the memory.
  linalg::GenericOp initProducer;
  TypedAttr initFill; ///< the constant, when this op's vertices fill
  bool fillsInit() const { return static_cast<bool>(initFill); }
  /// The fill becomes the first value of register-tiled accumulators
  /// (codegen::foldsFillIntoAccumulators, asked of the whole op): no pass of
  /// its own. ipu-map-tiles asks again of each kernel, exactly.
  bool fillFolded = false;
  bool isInitProducer = false;
  bool readsInit = false; ///< the body reads the outs block arguments
  int64_t macs = 0;
  /// The body's operations (describe counts them once; the planner costs
  /// thousands of candidates with them). An epilogue's are counted when
  /// costed: it joins the plan later.
  BodyOperations body;
  /// The loop a scatter-add's indices select (codegen::matchScatterAdd),
  /// and its result's rank: its vertices loop over the indices (sparse),
  /// not over the table's rows times the indices. -1 otherwise.
  int64_t scatterAxis = -1, scatterRank = 0;
  /// The chosen mapping's cost: the slowest exchange plus the slowest
  /// vertex among the sampled pieces (a bulk-synchronous step), and
  /// whether its buffers fit the memory budget.
  int64_t cycles = 0;
  bool fits = true;
  /// Bytes the costliest-in-memory vertex's tile needs for the step: its
  /// output piece and the regions it receives.
  int64_t memory = 0;
  /// The results have no elements: no compute set, only allocations.
  bool isEmpty = false;
  /// An elementwise op applied to each output piece by the same vertices,
  /// right after this op (the Relu after a convolution, see epilogueOf):
  /// the compute set's result is the epilogue's, and this op's result is
  /// never in tile memory.
  linalg::GenericOp epilogue;
  /// A reshape between this op and its epilogue that only drops or adds
  /// unit dimensions (a convolution's group dimension): the epilogue's
  /// result is then a view of the compute set's.
  Operation *epilogueReshape = nullptr;
  /// The epilogue's operand that is this op's result; its others are
  /// inputs of the compute set, `inputs[epilogueInputs[k]]` for the k-th.
  unsigned epilogueResultOperand = 0;
  std::vector<size_t> epilogueInputs;
  /// Whether the epilogue writes a result of its own, its element type not
  /// this op's (fp16.32: f32 partial sums rounded to fp16), instead of
  /// updating this op's result in place. The compute set then has both
  /// results, of this op's shape and mapping: the vertices' sums, dead after
  /// the step, and the epilogue's.
  bool epilogueWritesOwnResult() const;
};

/// `map`, whose results index a tensor of shape `from`, indexing instead

/// Fills `plan` with what `op` is: loops, the output's loops, inputs with
/// their access maps (operands, then tensors the body captures), whether the
/// body reads its init, its multiply-accumulates. Fails, with an error on
/// `op`, on what tile mapping cannot take (dynamic shapes, outputs not
/// indexed by parallel loops, non-constant scalars).
LogicalResult describe(linalg::GenericOp op, Plan &plan);
/// Makes `plan.epilogue`'s operands other than `result` (the op's result,
/// or its reshape) inputs of `plan`, read at the output's indices. Fails
/// when `canRead` refuses one (the planner: not placed before the op).
LogicalResult addEpilogueInputs(linalg::GenericOp generic, Value result, Plan &plan,
                                llvm::function_ref<bool(Value)> canRead);
/// Cycles of one vertex of `plan` running `loops`, writing `fillBytes` of
/// constants first (its output's initial value, an input's padding).
int64_t vertexCycles(const Plan &plan, const Box &loops, const target::CostModel &cost,
                     int64_t fillBytes = 0);
/// What a vertex's work takes from `plan`'s ops alone (element type,
/// instructions of the body and the epilogue), for the vertexCycles below:
/// the planner costs thousands of pieces of each op, and reading the ops
/// again for each was most of the cost of costing one.
target::VertexWork opVertexWork(const Plan &plan, const target::CostModel &cost);
/// vertexCycles, given opVertexWork(plan, cost).
int64_t vertexCycles(const Plan &plan, const target::VertexWork &ofOp, const Box &loops,
                     const target::CostModel &cost, int64_t fillBytes = 0);
/// Whether `plan`'s vertices run one kernel generic over the piece's shape,
/// reading the sizes from its operands' descriptors as a poplibs codelet
/// reads its fields: ops without reduction loops (nor an epilogue, which
/// only reductions have) that read boxes of their operands. Norm
/// arithmetic, activations not fused into a convolution, and the
/// optimizer's update then share one kernel per body whatever the shape:
/// less code on each tile (ResNet-50 training had 895 kernels and 279 KB
/// of code on tile 0) and less to compile. (The kernels of contractions
/// and other reductions are generic too, but for the ranges of their
/// reduction loops of one iteration: loopsReadFromDescriptor.)
bool runsShapeGeneric(const Plan &plan);
/// For each of `plan`'s loops, whether its kernels read that loop's range
/// from the descriptors rather than being specialised to it (a poplibs
/// codelet reads its sizes from its fields): every output loop of a kernel
/// generic over shapes, and for contractions and other reductions that read
/// boxes of their operands also the reduction loops of more than one
/// iteration that an input's dimension gives (inputDimOfLoop). Such a
/// kernel runs every piece of its op, and is shared with every op of the
/// same body and maps: ResNet-50's convolutions are 20 kernels, not 109, a
/// compile at another batch size finds most of them in the kernel cache,
/// and a tile running several layers stores one code. A reduction loop of
/// one iteration stays static (a 1x1 convolution's window), so that the
/// kernel keeps no loop for it. None for ops that must be specialised (see
/// runsShapeGeneric's exclusions).
std::vector<bool> loopsReadFromDescriptor(const Plan &plan);
/// The input (index in plan.inputs) and its dimension whose region's size
/// is loop `loop`'s range: a box input read at exactly that loop there.
std::optional<std::pair<size_t, size_t>> inputDimOfLoop(const Plan &plan, int64_t loop);
/// Tile memory the code of one of `plan`'s vertices takes.
int64_t vertexCodeBytes(const Plan &plan, const target::CostModel &cost);
/// The box of `plan`'s loops a vertex computing output `piece` runs: the
/// piece along the output loops, every reduction loop whole.
runtime::Box loopsOfPiece(const Plan &plan, const runtime::Box &piece);
/// The `count` grids of `shape` with the fewest elements in a piece among
/// those of at most `tiles` pieces, every chunk size of each dimension
/// considered (ceil(d / p) for p pieces), the finest first, ties in search
/// order. The grids a planner's candidate lists leave out are mostly
/// these: 256 channels in 13 pieces of 20, say, which with 8 rows of 56
/// (7 pieces) and 16 images fill 1,456 of an ipu2's 1,472 tiles, 2.7% over
/// an even share, where chunks of 256 / 2^k and 1,472 / 2^k left 128 tiles
/// idle (10.4% over). A depth-first search over the dimensions in turn
/// drops a branch whose pieces already pass `tiles`, or whose piece cannot
/// get smaller than the `count`-th found: the dimensions left, of D
/// elements, split into at most `tiles / pieces` more pieces, leave at
/// least D / that in each. It stops after `maxNodes` nodes.
std::vector<std::vector<int64_t>> finestGrids(llvm::ArrayRef<int64_t> shape, int64_t tiles,
                                              int64_t count, int64_t maxNodes);

} // namespace tessera::ipu::tiling

#endif // TESSERA_LIB_DIALECT_IPU_TRANSFORMS_TILEPLAN_H
