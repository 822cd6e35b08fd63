//===- GraphBase.td - graph dialect definition, types, enums -*- tablegen -*-===//
//
// The graph dialect holds framework-neutral tensor operators on value-semantic
// ranked tensors. Importers produce it; training, precision, pipelining and
// tile mapping consume it. Weights live in `ml_program.global`s.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_GRAPH_IR_GRAPHBASE_TD
#define TESSERA_DIALECT_GRAPH_IR_GRAPHBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::tessera::graph";
  let summary = "Framework-neutral tensor operators for the Tessera compiler";
  let description = [{
    Operators on value-semantic ranked tensors. Every op states its
    broadcasting rule explicitly, verifies its attributes and infers its result
    type, so an imported model has static shapes the tile mapper can plan.
    Parameters are `ml_program.global`s read with
    `ml_program.global_load_const`; small constants are `graph.constant`.

    Elementwise binary ops broadcast NumPy-style: shapes are aligned from the
    trailing dimension and a dimension of size 1 stretches. Nothing else
    broadcasts implicitly.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::ml_program::MLProgramDialect"];
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

// Every element type a model may carry. Unsigned and i8 types come from ONNX
// quantized and image models; f64 from scientific ones.
def Graph_AnyElement : AnyTypeOf<[F64, F32, F16, BF16, I64, I32, I16, I8,
                                  UI8, UI16, UI32, UI64, I1]>;
def Graph_FloatElement : AnyTypeOf<[F64, F32, F16, BF16]>;
def Graph_IntElement : AnyTypeOf<[I64, I32, I16, I8, UI8, UI16, UI32, UI64]>;
def Graph_IndexElement : AnyTypeOf<[I64, I32]>;

def Graph_Tensor : RankedTensorOf<[Graph_AnyElement]>;
def Graph_FloatTensor : RankedTensorOf<[Graph_FloatElement]>;
def Graph_NumericTensor : RankedTensorOf<[Graph_FloatElement, Graph_IntElement]>;
def Graph_BoolTensor : RankedTensorOf<[I1]>;
def Graph_IntOrBoolTensor : RankedTensorOf<[Graph_IntElement, I1]>;
def Graph_IndexTensor : RankedTensorOf<[Graph_IndexElement]>;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Graph_PadMode : I32EnumAttr<"PadMode", "padding mode", [
    I32EnumAttrCase<"constant", 0>, I32EnumAttrCase<"reflect", 1>,
    I32EnumAttrCase<"edge", 2>]> {
  let cppNamespace = "::tessera::graph";
  let genSpecializedAttr = 0;
}
def Graph_PadModeAttr : EnumAttr<Graph_Dialect, Graph_PadMode, "pad_mode">;

def Graph_ResizeMode : I32EnumAttr<"ResizeMode", "resize interpolation", [
    I32EnumAttrCase<"nearest", 0>, I32EnumAttrCase<"linear", 1>,
    I32EnumAttrCase<"cubic", 2>]> {
  let cppNamespace = "::tessera::graph";
  let genSpecializedAttr = 0;
}
def Graph_ResizeModeAttr : EnumAttr<Graph_Dialect, Graph_ResizeMode, "resize_mode">;

def Graph_CoordinateTransform : I32EnumAttr<"CoordinateTransform",
    "how an output coordinate maps to an input coordinate in resize", [
    I32EnumAttrCase<"half_pixel", 0>, I32EnumAttrCase<"pytorch_half_pixel", 1>,
    I32EnumAttrCase<"align_corners", 2>, I32EnumAttrCase<"asymmetric", 3>,
    I32EnumAttrCase<"tf_crop_and_resize", 4>]> {
  let cppNamespace = "::tessera::graph";
  let genSpecializedAttr = 0;
}
def Graph_CoordinateTransformAttr : EnumAttr<Graph_Dialect, Graph_CoordinateTransform, "coordinate_transform">;

def Graph_NearestMode : I32EnumAttr<"NearestMode",
    "rounding of a fractional coordinate in nearest resize", [
    I32EnumAttrCase<"round_prefer_floor", 0>,
    I32EnumAttrCase<"round_prefer_ceil", 1>,
    I32EnumAttrCase<"floor", 2>, I32EnumAttrCase<"ceil", 3>]> {
  let cppNamespace = "::tessera::graph";
  let genSpecializedAttr = 0;
}
def Graph_NearestModeAttr : EnumAttr<Graph_Dialect, Graph_NearestMode, "nearest_mode">;

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic, traits>;

#endif // TESSERA_DIALECT_GRAPH_IR_GRAPHBASE_TD
