//===- Passes.td - native code generation passes ------------*- tablegen -*-===//

#ifndef TESSERA_CODEGEN_PASSES_TD
#define TESSERA_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExternalizeWeights : Pass<"codegen-externalize-weights", "::mlir::ModuleOp"> {
  let summary = "Turn weight globals into trailing arguments of @main";
  let description = [{
    Native code does not embed weights: the runtime maps them from the
    executable and passes them in. Every `ml_program.global_load_const` in
    `@main` becomes a use of a new trailing argument of `@main` carrying the
    attribute `tessera.weight = "<global name>"` (one argument per global, in
    order of first use), and the globals are erased.

    Assumes: one entry function `@main`, immutable globals read only there.
    Guarantees: no ml_program op remains.
  }];
}

def HostOneReplica : Pass<"codegen-host-one-replica", "::mlir::ModuleOp"> {
  let summary = "The host reference as one replica: cross-replica sums are their inputs";
  let description = [{
    The host reference code runs one replica of a program, where the sum
    over the replicas of a tensor is the tensor: every
    `ipu.cross_replica_sum` is replaced by its inputs. (The runtime refuses
    to run a program of several replicas on the host reference, whose
    gradients would then be one replica's share.)
  }];
}

def SparseScatterAdds : Pass<"codegen-sparse-scatter-adds", "::mlir::ModuleOp"> {
  let summary = "Scatter-adds on buffers as loops over their indices, not over the table";
  let description = [{
    `graph.scatter_add` lowers to a reduction in which every element of the
    result (an embedding's gradient: rows x columns) compares every index:
    work rows x columns x indices. This pass rewrites each such
    `linalg.generic` on buffers (see `matchScatterAdd`), in vertex kernels
    and the host reference code alike, into PopLibs' multiUpdateAdd: a loop
    over the index positions that reads each index once and, when its row
    falls within the buffer's rows (a vertex's piece of the table), adds the
    update's row into it -- work indices x columns, plus the rows it lands
    on.

    Results are bit-identical: each element still adds its updates in index
    order, starting from the buffer's contents. The dense form also adds
    +0.0 for every other index, which changes no sum that started from
    +0.0 (none can become -0.0), and scatter_add's lowering and its splits
    always start from +0.0; only a buffer that held -0.0 before its first
    update would keep it here where the dense form gives +0.0.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def OutlineHostLoops : Pass<"codegen-outline-host-loops", "::mlir::ModuleOp"> {
  let summary = "Each loop nest of the host reference's @main as a function of its own";
  let description = [{
    The host reference code is one straight-line @main with a loop nest per
    operation (thousands in a training step). Lowering a function costs more
    than linearly in its size: `convert-scf-to-cf` splits the function's
    block at every loop, moving all that follows each time. This pass moves
    @main's operations, in consecutive parts of about `part-operations` operations each,
    into private functions `@main_part_<n>` called in their place, so the
    lowering passes work on small functions, in parallel. (Not a function
    per loop nest: lowering the calls looks each callee up in the module.)

    A part takes the values it uses from the rest of @main (constants are
    cloned in, not passed) and returns the values the rest uses. Stack
    allocations stay in @main (they live until their function returns), and
    a part without loops stays too. Numerics are unchanged: the same
    operations run in the same order.

    Assumes: buffers (after bufferization) and one block in @main.
  }];
  let options = [
    Option<"partOperations", "part-operations", "int64_t", "2000",
           "operations (nested ones included) after which a part ends at its "
           "next operation with regions">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def OrderLoopsForVectors : Pass<"codegen-order-loops-for-vectors", "::mlir::ModuleOp"> {
  let summary = "Interchange linalg.generic loops so the innermost loop is vectorizable";
  let description = [{
    `convert-linalg-to-loops` nests loops in iterator order, which for
    contractions puts a reduction innermost (a serial chain of adds into one
    output element, reloaded and stored every iteration). This pass
    interchanges each `linalg.generic` with reduction loops so that

      outer parallel loops (original order), reduction loops (original order),
      the parallel loop of the output's last dimension

    is the nesting: the innermost loop then walks the output row (and, for a
    matmul or a stride-1 convolution, the input row) contiguously and
    independently, which LLVM's loop vectorizer turns into vector code
    (matmul becomes the i-k-j order, a convolution the oc-ic-kh-kw-oh-ow order).

    Named linalg ops with reduction loops are generalized first. Ops without
    reduction loops, or whose output's last dimension is not a loop of its
    own, are left alone. Numerics change only by the order in
    which each output element's sum is accumulated — unchanged here, since
    every output element still adds its terms in the original reduction order.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def VectorizeContractions : Pass<"codegen-vectorize-contractions", "::mlir::ModuleOp"> {
  let summary = "Register-tiled vector code for accumulating linalg.generic ops on buffers";
  let description = [{
    Rewrites each `linalg.generic` on static f32/f64 buffers with reduction
    loops whose body accumulates into the output -- `out + a * b` (matmuls
    and convolutions, after `codegen-order-loops-for-vectors` generalized
    them, and vertex kernels' tiles of them), `out + a` (a split reduction's
    combining step, sum pooling), `maximumf(out, a)` / `minimumf(out, a)`
    (max pooling) -- into a loop nest whose innermost part is a register
    tile:

      for the other parallel loops:
        for each block of U rows (a parallel loop) and C vectors along the
        output's last dimension:
          acc[U][C] = load the output tile
          for the reduction loops (in the op's order):
            acc[r][c] = fma(a, b, acc[r][c])   // vector.fma (or add, max, min)
          store acc

    Every operand is addressed as one linear run of its storage (static
    strides), so loops that every operand walks as one run merge first: a
    1x1 convolution's output rows and columns become one loop (rows of 28
    instead of 2); reduction loops merge only with the next one, keeping
    each sum's order. The vectors run along the output loop with unit stride
    in the output. Vectors are `vector-bits` wide (512 by default: 16 f32;
    tessera-compile sizes them for the CPU the code is for, 256 bits with
    AVX2: wider vectors would be split in two by the instruction selector,
    which takes longer and needs twice the registers), fewer lanes for a
    shorter row; the last vector of a row is masked. An operand that varies along
    the row is a vector load when contiguous, a wider masked load and a
    `vector.shuffle` when every s-th element (s x lanes <= 64: a stride-2
    convolution's input), a `vector.gather` beyond; one that does not is a
    scalar broadcast. The row loop is an output loop the vector operands do
    not vary with (a convolution's output channels, a matmul's rows), so
    every loaded vector serves U accumulators; U <= 8 and U x C <= 16
    accumulators. Where that leaves accumulators to spare (a convolution
    tile of 6 output channels of one vector), the tile also spans a second
    row loop, one the broadcast operands do not vary with (the output
    rows), so each broadcast scalar serves several FMAs and the FMAs in
    flight hide their latency: 6 x 2 x 1 accumulators.

    A strided input (a stride-s convolution's) whose storage is dense and
    whose elements each take part in >= 16 of the op's iterations is read
    through a copy split into phases, made once at the start (a stack
    buffer of <= 64 KiB, s <= 4): each row of its last dimension becomes s
    runs (elements p, p + s, p + 2s, ...), so the row a tile reads is one
    contiguous run instead of a wider load and a shuffle per vector. The
    copy is a masked load, s shuffles and s stores per s vectors of input.

    A `linalg.fill` or copy right before the op that only sets its output
    (the op writes every output element, and reads no other copy of it) is
    folded in: the accumulators start as the fill's value, or are loaded
    from the copy's source, instead of a pass over the output of its own
    (a vertex zeroing its output piece or its partial sums; a reduction
    accumulating onto another op's values).

    Numerics: each output element still adds its terms in the reduction
    loops' order, but each term is a fused multiply-add (one rounding), as on
    the IPU's AMP units. Ops that do not match are left to
    `convert-linalg-to-loops`.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", "512",
           "width of the vector registers the tiles are sized for (512: "
           "AVX-512; 256: AVX2; 128: SSE, NEON)">,
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // TESSERA_CODEGEN_PASSES_TD
