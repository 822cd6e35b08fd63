//===- Passes.td - ipu dialect passes -----------------------*- tablegen -*-===//

#ifndef TESSERA_DIALECT_IPU_TRANSFORMS_PASSES_TD
#define TESSERA_DIALECT_IPU_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def IPUFuseElementwise
    : Pass<"ipu-fuse-elementwise", "::mlir::ModuleOp"> {
  let summary = "Fuse chains of elementwise ops into one";
  let description = [{
    A `linalg.generic` with only parallel loops whose result only another
    such generic reads (a residual Add and the Relu after it) is fused into
    that reader: the tile mapper then makes one compute set of the two, one
    step, one sync and one pass over tile memory fewer, and no tile memory
    for the intermediate result. So is one only a reduction reads, through
    a permutation of all the reduction's loops, each element once (a batch
    norm's squared deviations into their sum, a softmax's exponentials into
    theirs): `linalg.reduce` ops become generics first, and the reduction's
    body computes each element as it adds it in (elementwise chains are
    fused first; a chain that starts from a matmul's or a convolution's
    result stays that op's epilogue, run where the result is). Producers
    with other readers stay (fusing them would compute them twice), as do
    those a reader reads more than once (a matmul's or a convolution's
    operand: computed once per use, and no longer a contraction), and
    reductions' results.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::affine::AffineDialect"];
}

def IPUPrepareForMapping
    : Pass<"ipu-prepare-for-mapping", "::mlir::ModuleOp"> {
  let summary = "Bring linalg-on-tensors into the forms the tile mapper plans";
  let description = [{
    Named linalg ops become `linalg.generic`; `tensor.pad` becomes a fill and
    an insert, `tensor.concat` inserts; a strided `tensor.extract_slice`
    becomes a copying `linalg.generic` (offsets and strides in the input
    map) after a unit-stride slice of the dimensions it only narrows;
    non-splat tensor constants become private `ml_program.global`s (so they
    are placed on tiles like weights) and splat ones fills. A reduction that
    reads an input at a stride along a loop indexing nothing else in that
    dimension (a 1x1 convolution of stride 2) reads a strided slice of it
    instead, so its tiles receive only the elements they use.

    Guarantees: the only ops on tensors in functions are `linalg.generic`,
    `tensor.empty`, unit-stride `tensor.insert_slice` and
    `tensor.extract_slice`, reshapes and weight loads.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::ml_program::MLProgramDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::tensor::TensorDialect"];
}

def IPUPlanTiles : Pass<"ipu-plan-tiles", "::mlir::ModuleOp"> {
  let summary = "Decide how every op runs on the tiles, as #ipu.plan attributes";
  let description = [{
    Plans each `linalg.generic` of @main on the module's `#ipu.target`: the
    candidates split the output's dimensions into a grid of pieces, one per
    tile; each is costed with the target's rates (exchange cycles of the
    operand regions not already on the vertex's tile -- bytes at the
    exchange rate plus a set-up per contiguous region, so a layout that
    makes a vertex gather element by element pays per element -- compute
    cycles of the piece, with a set-up per row of it so that short rows
    cost what they do on the tile, sync) and must keep the vertex's output and receive buffers under
    `available-memory-proportion` of the tile's bytes (the bound is relaxed
    when nothing fits), and all the tile holds meanwhile under its size:
    what is live there, a share of the weights not placed yet, and the
    vertex code of every kernel, later ops' included (code stays from the
    program's start; ops not planned yet count once per kind, their body
    and indexing maps). Elementwise ops therefore follow their input's
    mapping, and matmuls and convolutions pick between output rows, columns,
    channels and spatial splits by what moves least. A fill or broadcast that
    only initializes a contraction takes the contraction's mapping and is
    updated in place; a constant fill (zeros, a split's identity) is then no
    compute set at all but an `ipu.alloc`, and each vertex of the
    contraction fills its piece first; a constant fill that several
    reductions accumulate into (CSE merges identical zero fills) is made
    again for each, so none is materialized. Weights, constants and inputs are
    placed where their first reader wants them; a piece that several blocks
    of tiles all read (a matmul weight's columns, read by every block of
    output rows) is spread over those blocks, so that each tile holds its
    share and no single tile sends the piece to every reader.

    A reduction that accumulates (`out = add/max(out, f(ins))`) is also
    costed split over the tiles: its longest reduction loop (a
    convolution's input channels, a matmul's k, a pooling window) is cut
    into 2, 4, 8, ... slices; a compute set computes the slices' partial
    results from the identity (the slice index becomes an output
    dimension, so the partials spread over tiles next to their slices of
    the operands) and a second one combines them into the op's own init
    (usually zeros: a convolution's bias is added after it, as an
    epilogue). Of the options that fit (the op as it is, and each
    split: its two steps and a sync), the one with the fewest slices
    within 3% of the fewest cycles is taken: the estimate samples a few
    pieces, so smaller differences are noise, and each slice is an
    output-sized partial sum written, exchanged and added. Partial sums
    change the order of floating-point additions. When no option fits the
    memory budget, the reduction is cut into 2, 4, 8, ... serial steps
    instead (Poplar's serial splits): each a compute set adding one slice
    into the result of the one before, in place, so that a vertex holds
    only its slice of the operands at a time (a 4096 x 4096 matmul in fp32
    runs in 16); the fewest steps that fit are taken. When nothing fits at
    all, the option needing the least memory is.

    A gather (a body reading a captured table at data-dependent rows) is
    planned with the table split by the columns the output reads, each
    tile holding all rows of its columns. The table is a variable, not a
    temporary: a column over the memory budget stays whole while the plan
    placing it fits the tile (150,000 x 768 fp32 rows, 461 MB, on one
    ipu2). Beyond, the table's rows are split into blocks too (2, 3, ...
    8, then a quarter more each time): a partial lookup per block (its body
    reads `p * B + clamp(row - p * B)` and yields zero for rows of other
    blocks; a shorter last block is read through a dynamic size) and a
    combining step that ORs the partials' bits, exact for every value. The
    fewest blocks that fit and the next two are costed and the cheapest
    taken (250,000 x 768 fp32 rows, 768 MB, in 5 blocks; up to 290,000
    rows, 891 MB, fit one ipu2).
    The combining step is what a lookup costs beyond sending its indices:
    the exchange is fixed when compiling, so every block's partial is
    sent (as Poplar's multiSlice reduces over its dictionary split).

    A reduction's result read only by an elementwise op, element for
    element (the Relu after a convolution, a residual Add and Relu, a bias
    broadcast along some dimensions, possibly through a reshape that drops
    unit dimensions), gets that op as an epilogue: the same vertices apply
    it to each output piece in place right after computing it (for a split
    reduction, the combining step's), reading its other operands' regions as
    more inputs of the compute set, so it is no compute set, sync or pass
    over tile memory of its own.

    A value padded with a constant (an insert into a fill, as a padded
    convolution or pooling input) that only generics read, directly or
    through unit-dimension reshapes, is an `ipu.pad_view` of the unpadded
    value: no fill step, no copy step, no tile memory; each vertex receives
    the interior's part of its region and the padding around it.

    Weights are placed by their first reader's plan, also through a view
    that only adds a unit dimension (a convolution's group dimension), so
    that they sit on the tiles that read them. Chunk candidates include
    piece counts that divide the tile count (1472 = 64 x 23), and the 128
    grids with the smallest pieces over every chunk size are costed too
    (a depth-first search, `finestGrids`); a plan is costed at its first, a
    central and its last piece.

    A constant weight read by several blocks of tiles (a convolution's
    weights, read by every block of output positions) may be mirrored: a
    copy of its pieces on every block, loaded once with the program, so
    that each vertex reads its weights in place instead of receiving them
    in every run (`ipu.mirrors` on its load). Each plan is costed both
    ways; a mirrored one is taken when it saves at least a quarter of the
    op's cycles and 0.2 cycles per byte its copies take on a tile, while
    the weights, copies included, stay within two thirds of the memory
    budget on every tile and one op's copies take at most a quarter of
    that. A smaller `available-memory-proportion` mirrors less.

    The decisions are recorded, not applied: each `linalg.generic` of @main
    to run gets an `#ipu.plan` (its results' mapping; `epilogue` when it
    absorbs its reader; `in_place` when it updates its init's producer's
    result), inputs, weights, empty tensors and slices an `ipu.mapping`, and
    an insert that becomes a padded view `ipu.padded_view`. The only IR
    changes are the reduction splits (their worth depends on how their
    parts are mapped, so they are decided and made here) and copies of a
    shared fill or insert destination, one per reader. `ipu-map-tiles`
    applies the plans. With `explain`, each op gets a remark saying its plan
    and estimated cycles, and each reduction why it was split or not (its
    cycles split against unsplit, and every split it weighed: its cycles,
    those of the partial sums and of the combining step; or the serial
    steps); `--mlir-pass-statistics` counts plans,
    splits, epilogues and ops over the memory budget.
  }];
  let options = [
    Option<"availableMemoryProportion", "available-memory-proportion", "double",
           /*default=*/"0.6",
           "Fraction of each tile's memory a vertex's output and receive "
           "buffers may take (PopTorch's availableMemoryProportion)">,
    Option<"explain", "explain", "bool", /*default=*/"false",
           "Emit a remark on each op with its plan and estimated cycles, and "
           "on each reduction why it was split or not">,
    Option<"recordAssumedMemory", "record-assumed-memory", "bool", /*default=*/"false",
           "Record on the module, as ipu.assumed_tile_bytes, the most bytes the "
           "planner took each tile to hold during any step (to check its "
           "accounting against the memory plan)">,
  ];
  let statistics = [
    Statistic<"numPlanned", "planned-ops", "linalg.generic ops planned">,
    Statistic<"numSplit", "split-reductions",
              "reductions split into partial results and a combining step">,
    Statistic<"numEpilogues", "epilogues",
              "elementwise ops planned as their producer's epilogues">,
    Statistic<"numOverBudget", "over-budget",
              "ops planned over the memory budget (nothing fit)">,
    Statistic<"numMirrored", "mirrored-weights",
              "weights mirrored on the blocks of tiles that read them">,
    Statistic<"numCostedCandidates", "costed-candidates",
              "candidate grids costed">,
    Statistic<"numBoundedCandidates", "bounded-candidates",
              "candidate grids not costed: their compute alone took longer "
              "than a costed grid that fits">,
  ];
  let dependentDialects = ["::tessera::ipu::IPUDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect"];
}

def IPUMapTiles : Pass<"ipu-map-tiles", "::mlir::ModuleOp"> {
  let summary = "Apply the tile plans: compute sets, vertices, copies and views";
  let description = [{
    Applies the `#ipu.plan` that `ipu-plan-tiles` recorded on each
    `linalg.generic` of @main; it makes no choice of its own. Each planned
    op becomes an `ipu.compute_set` over its plan's mapping whose kernels
    (one per distinct piece shape, or one generic over shapes: below) are outlined as `func.func`s on memrefs
    marked `ipu.vertex`, taking the piece's loop offsets and its operand
    regions. An op without reduction loops (so without an epilogue) that
    reads boxes of its operands gets a kernel generic over the piece's
    shape (the sizes the piece decides are dynamic, read from the operands'
    descriptors, as a poplibs codelet reads its fields): one function for
    all its pieces, shared with every op of the same body whatever its
    shape. So does a contraction or other reduction that reads boxes: its
    output sizes and the ranges of its reduction loops (those of more than
    one iteration, read from the input region that holds them) are dynamic,
    so one kernel runs every piece, and serves every op of the same body
    and maps (ResNet-50's 109 kernels are 20, and most of them serve a
    compile at another batch size from the kernel cache). With `epilogue`, its elementwise reader runs in the same
    vertices on each piece (that reader and any unit-dimension reshape
    before it go); with `in_place`, the compute set updates its init's
    producer in place, and a producer that only fills a constant becomes an
    `ipu.alloc` whose fill each vertex does. Kernels that are identical (the
    same code on the same shapes, as in a network's repeated blocks, or the
    same body when generic over shapes) are outlined once and shared. Inserts become `ipu.copy` (or, marked
    `ipu.padded_view`, an `ipu.pad_view` of their source, the fill gone),
    slices an `ipu.alloc` and an `ipu.copy`, reshapes `ipu.view`, empty
    tensors and ops without elements `ipu.alloc`. Each kernel's cycles come
    from the target's cost model. A plan that cannot apply (a mapping of
    another rank or past the last tile, an epilogue or in-place init the IR
    does not have, a generic without a plan) is an error on its op.
  }];
  let statistics = [
    Statistic<"numComputeSets", "compute-sets", "compute sets made">,
    Statistic<"numKernels", "kernels", "distinct vertex kernels outlined">,
    Statistic<"numSharedKernels", "shared-kernels",
              "kernels found identical to one outlined before">,
  ];
  let dependentDialects = ["::tessera::ipu::IPUDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect"];
}

def IPUStashActivations : Pass<"ipu-stash-activations", "::mlir::ModuleOp"> {
  let summary = "Give a pipelined training step's stashed activations their copies";
  let description = [{
    In a pipeline of P stages, stage s works on 2 (P - s) - 1 micro-batches
    between the forward pass of one and its backward pass (PopART's
    schedule): every activation of the stage that the backward pass reads
    is held once per micro-batch in flight. This pass finds them -- results
    of compute sets before the first one marked `graph.backward`, read (also
    through views) by a step from it on -- and records the copies in
    `ipu.stash_copies` (by the compute set's `graph.stage`), which the
    program's variables and ipu-allocate-memory take. The IPU model runs
    the micro-batches in turn and uses one copy; the memory plan holds all
    of them, as the chip must. Stashes of the model's inputs are not
    counted.

    With `pipeline-stages` 1 (or no backward pass) nothing changes.
  }];
  let options = [
    Option<"pipelineStages", "pipeline-stages", "int64_t", "1",
           "stages of the pipeline (P)">,
  ];
}

def IPUAllocateMemory : Pass<"ipu-allocate-memory", "::mlir::ModuleOp"> {
  let summary = "Place every variable, receive buffer and kernel in tile memory";
  let description = [{
    Liveness-based allocation of the machine program (the same plan the IPU
    model uses to lay out its tile memories). A program that does not fit
    fails here with a diagnostic naming the tile, the bytes needed and
    available, and the largest live variables by category (weights,
    activations, temporaries, code). With `report`, a directory, the report
    page is written there (`report.html`, with its data in `report.json`):
    every tile's memory by category, what is live where and when, the
    steps' estimated cycles; for a program that does not fit, what every
    tile would need, with the failing tile highlighted and the advice. (An
    executable's report, `tessera-report` or `tessera-compile --report`,
    adds its host streams and training figures.) On success @main gets
    `ipu.memory = {peak_bytes, peak_tile, bytes_per_tile}`.
  }];
  let options = [
    Option<"reportDir", "report", "std::string", /*default=*/"",
           "Write the report page to this directory (also when the program does not fit)">,
    Option<"reportWhenItFits", "report-when-it-fits", "bool", /*default=*/"true",
           "With report: write it also when the program fits (false when an "
           "executable's fuller report follows)">,
  ];
}

#endif // TESSERA_DIALECT_IPU_TRANSFORMS_PASSES_TD
