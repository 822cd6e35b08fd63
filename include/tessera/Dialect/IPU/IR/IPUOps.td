//===- IPUOps.td - the ipu dialect: the machine program -----*- tablegen -*-===//
//
// After tile mapping a model is a machine program: variables placed on tiles
// by regular grid mappings, compute sets whose vertices run one kernel per
// distinct piece shape (or one generic over shapes) on many tiles, copies (exchange-only steps) and views.
// Per-tile facts are computed from the grids, never stored per tile, so a
// program for 1472 tiles and hundreds of compute sets stays small.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_IPU_IR_IPUOPS_TD
#define TESSERA_DIALECT_IPU_IR_IPUOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"

def IPU_Dialect : Dialect {
  let name = "ipu";
  let cppNamespace = "::tessera::ipu";
  let summary = "The tile-mapped machine program for the IPU";
  let description = [{
    Values are variables: tensors with a `#ipu.mapping` that says which tile
    holds which piece. `ipu.compute_set` runs a vertex kernel (a `func.func`
    on memrefs marked `ipu.vertex`) per output piece; `ipu.copy` moves a
    region between variables in an exchange-only step; `ipu.view` reshapes
    without moving data and `ipu.pad_view` pads without storing the
    padding. The module's `ipu.target` attribute names the machine the
    program was planned for.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class IPU_Attr<string name, string mnemonicName> : AttrDef<IPU_Dialect, name> {
  let mnemonic = mnemonicName;
}

def IPU_TargetAttr : IPU_Attr<"Target", "target"> {
  let summary = "The machine a program is planned for";
  let description = [{
    A target by name (`ipu1`, `ipu2`, `bow`; its rates come from the target
    description) with the numbers that size the program:
    `#ipu.target<"ipu2", ipus = 1, tiles_per_ipu = 1472, bytes_per_tile = 638976>`.
  }];
  let parameters = (ins StringRefParameter<>:$name, "int64_t":$ipus,
                        "int64_t":$tilesPerIpu, "int64_t":$bytesPerTile);
  let assemblyFormat = [{
    `<` $name `,` `ipus` `=` $ipus `,` `tiles_per_ipu` `=` $tilesPerIpu `,`
    `bytes_per_tile` `=` $bytesPerTile `>`
  }];
  let genVerifyDecl = 1;
}

def IPU_MappingAttr : IPU_Attr<"Mapping", "mapping"> {
  let summary = "A regular grid of pieces over a tensor, one piece per tile";
  let description = [{
    Piece `p` covers `[p[d]*chunks[d], min((p[d]+1)*chunks[d], dim d))` in
    every dimension and lives on tile `first_tile + sum(p[d]*tile_strides[d])`:
    `#ipu.mapping<chunks = [1, 8, 56], tile_strides = [8, 1, 0], first_tile = 0>`.
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$chunks,
                        ArrayRefParameter<"int64_t">:$tileStrides,
                        "int64_t":$firstTile);
  let assemblyFormat = [{
    `<` `chunks` `=` custom<IntList>($chunks) `,` `tile_strides` `=`
    custom<IntList>($tileStrides) `,` `first_tile` `=` $firstTile `>`
  }];
}

def IPU_PlanAttr : IPU_Attr<"Plan", "plan"> {
  let summary = "How a linalg.generic runs on the tiles: ipu-plan-tiles' decision";
  let description = [{
    The decision `ipu-plan-tiles` records on each `linalg.generic` of @main
    and `ipu-map-tiles` applies: the `mapping` of the op's results (one piece
    per tile; each vertex computes one piece); `epilogue`: the op's only
    reader, an elementwise generic (through a reshape of unit dimensions at
    most), runs in the same vertices on each piece; `in_place`: the op's
    init is the result of the generic before it, which takes this op's
    mapping and is updated in place (when that generic only fills a
    constant, it is no step of its own: each vertex fills its piece first).
    `#ipu.plan<mapping = #ipu.mapping<chunks = [1, 64], tile_strides = [0, 1], first_tile = 0>, epilogue>`.
  }];
  let parameters = (ins "MappingAttr":$mapping, "bool":$epilogue, "bool":$inPlace);
  let hasCustomAssemblyFormat = 1;
}

class IPU_Op<string mnemonic, list<Trait> traits = []>
    : Op<IPU_Dialect, mnemonic, traits>;

def IPU_ComputeSetOp : IPU_Op<"compute_set", [Pure, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Vertices over tiles: one per piece of the outputs' mapping";
  let description = [{
    The loop nest `loop_ranges` is split by the mapping of the results (all
    results share it): result dimension `j` is loop `output_loops[j]`. The
    vertex for an output piece runs the kernel of `kernels` for the piece's
    shape: kernel `k` for the mapping's `k`-th distinct piece shape (per
    dimension the chunk, then the remainder if any, combined in row-major
    order); a kernel generic over shapes (dynamic output sizes) may be named
    for several, with the piece's loop offsets and, for input
    `i`, the region `access_maps[i]` reads over the piece's loop box (the
    whole input when `i` is listed in `full_inputs`). Each iteration reads
    one element per dimension unless `extents` gives input `i` a window per
    dimension (an empty list: all ones): a gather's table, read at
    data-dependent rows, has map `(n, d) -> (0, d)` and extents `[rows, 1]`,
    so a vertex receives the columns it computes, not the whole table. With `inits`, result
    `k` is `inits[k]` updated in place (the vertex reads and writes the
    piece it holds; a contraction accumulating onto a value computed before it); an init must
    have no other use. Results past the inits are new: the result of an
    epilogue of another type than the op it follows (fp16.32's rounding of
    f32 sums), which the same vertices write after the op's. Each kernel names a `func.func` of the module marked
    `ipu.vertex`. `kernel_cycles` are the
    estimated cycles of each kernel on one tile; `macs` counts the
    multiply-accumulates of the whole op (0 when it is not a contraction).

    ```mlir
    %y = ipu.compute_set "cs0" ins(%x : tensor<64x128xf32>)
           loops [64, 128] outputs [0, 1]
           maps [affine_map<(d0, d1) -> (d0, d1)>] full []
           kernels [@vertex_cs0_0] cycles [580] macs 0
           mapping #ipu.mapping<chunks = [1, 128], tile_strides = [1, 0], first_tile = 0>
           : tensor<64x128xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs,
                       Variadic<AnyRankedTensor>:$inits, StrAttr:$name,
                       DenseI64ArrayAttr:$loop_ranges,
                       DenseI64ArrayAttr:$output_loops,
                       AffineMapArrayAttr:$access_maps,
                       DenseI64ArrayAttr:$full_inputs,
                       OptionalAttr<TypedArrayAttrBase<DenseI64ArrayAttr,
                           "one extent list per input">>:$extents,
                       SymbolRefArrayAttr:$kernels,
                       DenseI64ArrayAttr:$kernel_cycles, I64Attr:$macs,
                       IPU_MappingAttr:$mapping);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $name (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    (`inits` `(` $inits^ `:` type($inits) `)`)?
    `loops` $loop_ranges `outputs` $output_loops `maps` $access_maps
    `full` $full_inputs (`extents` $extents^)? `kernels` $kernels
    `cycles` $kernel_cycles
    `macs` $macs `mapping` $mapping attr-dict `:` type($results)
  }];
  let hasVerifier = 1;
}

def IPU_CopyOp : IPU_Op<"copy", [Pure,
    AllTypesMatch<["dest", "result"]>]> {
  let summary = "Copy a region of one variable into another, in place";
  let description = [{
    An exchange-only step: the region of `source` at `source_offsets` with
    `sizes` is written into `dest` at `dest_offsets`; the result is `dest`
    updated in place (the dest value must have no other use).
  }];
  let arguments = (ins AnyRankedTensor:$source, AnyRankedTensor:$dest,
                       DenseI64ArrayAttr:$source_offsets,
                       DenseI64ArrayAttr:$sizes,
                       DenseI64ArrayAttr:$dest_offsets);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $source `` $source_offsets `` $sizes `into` $dest `` $dest_offsets
    attr-dict `:` type($source) `into` type($dest)
  }];
  let hasVerifier = 1;
}

def IPU_CrossReplicaSumOp : IPU_Op<"cross_replica_sum", [Pure]> {
  let summary = "Sum tensors over the replicas (a merged all-reduce)";
  let description = [{
    Result `i` is the sum of `inputs[i]` over every replica of the program,
    the same in each replica: the gradients of a replicated training step,
    reduced so that the replicas' weights stay equal. One op reduces many
    tensors in one collective, a ring over the IPU-Links whose syncs are
    paid once (as Poplar merges a step's gradient all-reduces). Each result
    is a new variable; `ipu-plan-tiles` maps it like its input (attribute
    `ipu.mappings`, one `#ipu.mapping` per result), so each tile sums the
    piece it holds. The host reference code runs one replica, where the
    sum is the input itself.

    ```mlir
    %g0, %g1 = ipu.cross_replica_sum %a, %b : tensor<64xf32>, tensor<8x8xf32>
                 -> tensor<64xf32>, tensor<8x8xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($results)";
  let hasVerifier = 1;
}

def IPU_AllocOp : IPU_Op<"alloc", [Pure]> {
  let summary = "A new variable with a tile mapping, not initialized";
  let arguments = (ins IPU_MappingAttr:$mapping);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$mapping attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def IPU_ViewOp : IPU_Op<"view", [Pure]> {
  let summary = "Reinterpret a variable in another shape (row-major), no copy";
  let arguments = (ins AnyRankedTensor:$source);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($result)";
  let hasVerifier = 1;
}

def IPU_PadViewOp : IPU_Op<"pad_view", [Pure]> {
  let summary = "A variable seen with constant padding around it, no copy";
  let description = [{
    Virtual padding: the result is `source` with `low[d]` elements before
    and `high[d]` after it in every dimension d, all equal to `padding`, but
    nothing is stored for it. A vertex reading a region of it receives the
    source's elements there and the padding value around them (as poplibs'
    convolutions read unpadded inputs), so a padded convolution input needs
    neither a zero-filled copy nor a step to fill it.
  }];
  let arguments = (ins AnyRankedTensor:$source, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high, TypedAttrInterface:$padding);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $source `low` $low `high` $high `padding` $padding attr-dict `:`
    type($source) `to` type($result)
  }];
  let hasVerifier = 1;
}

#endif // TESSERA_DIALECT_IPU_IR_IPUOPS_TD
