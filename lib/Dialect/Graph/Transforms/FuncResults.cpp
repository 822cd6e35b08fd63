//===- FuncResults.cpp - rewrite @main's results in training passes ------===//

#include "FuncResults.h"

using namespace mlir;

namespace tessera::graph {

SmallVector<Attribute> resultAttrDicts(func::FuncOp func) {
  SmallVector<Attribute> attrs;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    DictionaryAttr dict = func.getResultAttrDict(i);
    attrs.push_back(dict ? dict : DictionaryAttr::get(func.getContext()));
  }
  return attrs;
}

void setResults(func::FuncOp func, ValueRange values, ArrayRef<Attribute> attrs) {
  func.front().getTerminator()->setOperands(values);
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                 values.getTypes()));
  func.setAllResultAttrs(attrs);
}

} // namespace tessera::graph
