//===- HostOneReplica.cpp - the host reference code as one replica --------===//

#include "tessera/Codegen/Passes.h"
#include "tessera/Dialect/IPU/IR/IPU.h"

namespace tessera {
#define GEN_PASS_DEF_HOSTONEREPLICA
#include "tessera/Codegen/Passes.h.inc"
} // namespace tessera

using namespace mlir;

namespace {

struct HostOneReplica : tessera::impl::HostOneReplicaBase<HostOneReplica> {
  void runOnOperation() override {
    getOperation().walk([](tessera::ipu::CrossReplicaSumOp sum) {
      sum.replaceAllUsesWith(sum.getInputs());
      sum.erase();
    });
  }
};

} // namespace
